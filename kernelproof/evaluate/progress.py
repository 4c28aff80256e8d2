"""Where an evaluation tells the phases it has finished, for a person watching (`eval` piped).

A pipe shows nothing until the verdict otherwise, and an evaluation can take minutes. The caller
sets a sink for its own context (a context variable: threads and other callers are untouched) and
the chain reports each phase as it ends; with no sink set, nothing is reported. Inside the
correctness phase, which can take many minutes (a large task, an interpreted Triton kernel), the
cases done so far are told too, at most every ``CASE_EVERY_S``: a quick evaluation shows no such
line, a slow one shows that it is alive.
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

_sink: contextvars.ContextVar[Callable[[str, float], None] | None] = contextvars.ContextVar(
    "kernelproof_progress", default=None
)
_started: contextvars.ContextVar[float | None] = contextvars.ContextVar("kernelproof_started", default=None)
_last_case: contextvars.ContextVar[float | None] = contextvars.ContextVar(
    "kernelproof_last_case", default=None
)
CASE_EVERY_S = 10.0  # cases done are told at most this often


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


def began(started: float) -> None:
    """The evaluation in this context began at ``started`` (time.monotonic)."""
    _started.set(started)
    _last_case.set(started)


def case_done(done: int, total: int) -> None:
    """``done`` of ``total`` correctness cases are done: told when ``CASE_EVERY_S`` have passed
    since the evaluation began or since the last such line."""
    sink, started, last = _sink.get(), _started.get(), _last_case.get()
    if sink is None or started is None:
        return
    now = time.monotonic()
    if last is not None and now - last < CASE_EVERY_S:
        return
    _last_case.set(now)
    sink(f"case {done} of {total} checked", now - started)
