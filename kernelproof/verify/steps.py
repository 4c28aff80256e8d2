"""Where an evaluation's time goes, step by step: the verdict's ``environment["steps"]``.

The phase marks (``environment["phases"]``) say when setup, the worker, correctness and timing
ended; a sweep that takes too long needs the steps inside them too: the reference runs, the
float64 oracle, each audit control, the shape probes, the footprint estimate, the chunk check,
the worker's start and the handoff, each correctness case and its comparison. Steps nest: a step
opened inside another is named after it (``setup/audit/oracle``), and each name keeps its total
seconds and how many times it ran, so a nested step's seconds are part of its parent's.

The evaluation opens a clock for its own context (a context variable: other evaluations in other
threads keep theirs); with no clock open, a step costs one lookup and records nothing. The clocks
open now can be listed (:func:`live`) with the step each is in: a sweep that goes minutes without
a verdict says where its evaluations are.
"""

from __future__ import annotations

import contextvars
import threading
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import dataclass
from typing import Any

from kernelproof import torch_globals

LOCK_WAIT_MIN_S = 0.001


@dataclass(frozen=True)
class StepCost:
    """One step's total over an evaluation."""

    name: str  # slash-separated path, outermost first: "setup/audit/reference"
    seconds: float  # total wall time, nested steps included
    count: int  # how many times it ran

    @classmethod
    def from_json(cls, name: str, doc: dict) -> StepCost:
        return cls(name, float(doc.get("s", 0.0)), int(doc.get("n", 0)))


class StepClock:
    """The totals of one evaluation's steps. ``totals`` is JSON-ready and updated in place, so the
    verdict's environment can hold it from the start and a verdict stopped early still has it."""

    def __init__(self, label: str = "") -> None:
        self.label = label  # what is evaluated, for :func:`live`
        self.started = time.monotonic()
        self.totals: dict[str, dict[str, float | int]] = {}
        self._stack: list[str] = []
        self._entered: list[float] = []  # when each open step began

    def where(self, now: float) -> tuple[str, float]:
        """The innermost open step (its full name; "" before the first) and its seconds at `now`
        (time.monotonic)."""
        stack, entered = list(self._stack), list(self._entered)  # another thread may be stepping
        if not stack or len(entered) != len(stack):
            return "", 0.0
        return "/".join(stack), now - entered[-1]

    def lock_waited(self, seconds: float) -> None:
        """A wait for the parent's torch state (kernelproof/torch_globals.py), as a ``lock_wait``
        step under the step that waited; waits under a millisecond are not worth a line."""
        if seconds >= LOCK_WAIT_MIN_S:
            self.add("/".join([*self._stack, "lock_wait"]), seconds)

    def add(self, name: str, seconds: float) -> None:
        entry = self.totals.setdefault(name, {"s": 0.0, "n": 0})
        entry["s"] = round(float(entry["s"]) + seconds, 4)
        entry["n"] = int(entry["n"]) + 1


_clock: contextvars.ContextVar[StepClock | None] = contextvars.ContextVar("kernelproof_steps", default=None)


_live: dict[int, StepClock] = {}
_live_lock = threading.Lock()


@contextmanager
def recording(label: str = "") -> Iterator[StepClock]:
    """Within the block, steps are recorded into the clock it yields (listed by :func:`live`)."""
    clock = StepClock(label)
    token = _clock.set(clock)
    waits = torch_globals.observe_waits(clock.lock_waited)
    with _live_lock:
        _live[id(clock)] = clock
    try:
        yield clock
    finally:
        with _live_lock:
            _live.pop(id(clock), None)
        torch_globals.stop_observing(waits)
        _clock.reset(token)


@dataclass(frozen=True)
class Open:
    """An evaluation in progress: where it is now."""

    label: str
    step: str  # the innermost open step, full name ("" before the first)
    step_s: float  # seconds in that step so far
    elapsed_s: float  # seconds since the evaluation began


def live() -> list[Open]:
    """Every clock open now in this process, oldest first."""
    with _live_lock:
        clocks = sorted(_live.values(), key=lambda c: c.started)
    now = time.monotonic()
    return [Open(c.label, *c.where(now), now - c.started) for c in clocks]


@contextmanager
def step(name: str) -> Iterator[None]:
    """Time the block as `name`, nested under the steps open around it."""
    clock = _clock.get()
    if clock is None:
        yield
        return
    clock._stack.append(name)
    clock._entered.append(time.monotonic())
    full = "/".join(clock._stack)
    started = time.perf_counter()
    try:
        yield
    finally:
        clock._entered.pop()
        clock._stack.pop()
        clock.add(full, time.perf_counter() - started)


def said(laps: object, known: frozenset[str]) -> None:
    """The seconds a worker says one request spent in each of its laps, recorded as steps
    ``said/<lap>`` under the step open now (a case's ``case_worker``): where the worker's part of
    an evaluation goes, in the cost table. The worker's own word (the candidate shares its
    process): a cost figure only, nothing is judged by it; a lap outside `known`, or a figure that
    is not a non-negative number, is left out, so a reply cannot add lines of its own."""
    clock = _clock.get()
    if clock is None or not isinstance(laps, dict):
        return
    for name, seconds in laps.items():
        if (
            name in known
            and isinstance(seconds, (int, float))
            and not isinstance(seconds, bool)
            and seconds >= 0
        ):
            clock.add("/".join([*clock._stack, "said", name]), float(seconds))


@contextmanager
def entered(held: AbstractContextManager[Any], wait: str) -> Iterator[None]:
    """Inside `held` (a gate, a lock), the wait to enter it timed as the step `wait`: seconds an
    evaluation spends waiting on its neighbours are shown where they go, never left out of every
    step (on an H100 with four in flight, half of some evaluations' seconds were in no step)."""
    with ExitStack() as stack:
        with step(wait):
            stack.enter_context(held)
        yield


def costs_of(environment) -> list[StepCost]:
    """The steps a verdict's environment recorded (none for a verdict from before steps existed)."""
    doc = environment.get("steps") if hasattr(environment, "get") else None
    if not isinstance(doc, dict):
        return []
    return [StepCost.from_json(k, v) for k, v in doc.items() if isinstance(v, dict)]
