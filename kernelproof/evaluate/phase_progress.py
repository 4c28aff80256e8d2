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
_item: contextvars.ContextVar[str] = contextvars.ContextVar("kernelproof_item", default="")
CASE_EVERY_S = 10.0  # cases done are told at most this often


@contextmanager
def reporting(sink: Callable[[str, float], None]) -> Iterator[None]:
    """Within the block, `sink(phase, seconds since the evaluation began)` as each phase ends."""
    token = _sink.set(sink)
    try:
        yield
    finally:
        _sink.reset(token)


@contextmanager
def about(item: str) -> Iterator[None]:
    """Within the block, the evaluation under way is of `item` (a solution's path): a verb over
    many evaluations (bench) names it beside the phase it reached, read with :func:`current_item`."""
    token = _item.set(item)
    try:
        yield
    finally:
        _item.reset(token)


def current_item() -> str:
    """The item whose evaluation runs in this context ("" outside :func:`about`)."""
    return _item.get()


def report(phase: str, seconds: float) -> None:
    sink = _sink.get()
    if sink is not None:
        sink(phase, seconds)


def began(started: float) -> None:
    """The evaluation in this context began at ``started`` (time.monotonic)."""
    _started.set(started)
    _last_case.set(started)


def case_done(done: int, total: int, what: str = "case") -> None:
    """``done`` of ``total`` correctness cases are done: told when ``CASE_EVERY_S`` have passed
    since the evaluation began or since the last such line. `what` names them: the probed shapes'
    cases, which run after the contract's, are "probed-shape case" (not "case 1 of 2" after 32)."""
    sink, started, last = _sink.get(), _started.get(), _last_case.get()
    if sink is None or started is None:
        return
    now = time.monotonic()
    if last is not None and now - last < CASE_EVERY_S:
        return
    _last_case.set(now)
    sink(f"{what} {done} of {total} checked", now - started)
