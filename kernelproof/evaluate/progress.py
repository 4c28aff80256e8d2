"""Where an evaluation tells the phases it has finished, for a person watching (`eval` piped).

A pipe shows nothing until the verdict otherwise, and an evaluation can take minutes. The caller
sets a sink for its own context (a context variable: threads and other callers are untouched) and
the chain reports each phase as it ends; with no sink set, nothing is reported.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Iterator
from contextlib import contextmanager

_sink: contextvars.ContextVar[Callable[[str, float], None] | None] = contextvars.ContextVar(
    "kernelproof_progress", default=None
)


@contextmanager
def reporting(sink: Callable[[str, float], None]) -> Iterator[None]:
    """Within the block, `sink(phase, seconds since the evaluation began)` as each phase ends."""
    token = _sink.set(sink)
    try:
        yield
    finally:
        _sink.reset(token)


def report(phase: str, seconds: float) -> None:
    sink = _sink.get()
    if sink is not None:
        sink(phase, seconds)
