"""A shape's baseline workers are given back in a shared turn, whatever ended its timing.

Giving one back makes it rest (its last batch and its allocator's cache freed) or closes it: GPU
memory freed, which must not happen inside another evaluation's timed window (evaluate/timing.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from kernelproof.evaluate import timing


class _Turns:
    def __init__(self, events: list[str]) -> None:
        self.events = events

    @contextmanager
    def shared(self) -> Iterator[None]:
        self.events.append("shared turn")
        yield
        self.events.append("turn over")


def test_the_baselines_are_given_back_inside_a_shared_turn() -> None:
    events: list[str] = []
    with timing._leases(_Turns(events)) as leases:  # type: ignore[arg-type]
        leases.callback(events.append, "given back")
        events.append("timed")
    assert events == ["timed", "shared turn", "given back", "turn over"]


def test_a_timing_that_failed_gives_them_back_in_a_shared_turn_too() -> None:
    events: list[str] = []
    with pytest.raises(RuntimeError, match="worker died"):
        with timing._leases(_Turns(events)) as leases:  # type: ignore[arg-type]
            leases.callback(events.append, "given back")
            raise RuntimeError("worker died")
    assert events == ["shared turn", "given back", "turn over"]
