"""Who may use one GPU now: the untimed work of any number of evaluations, or one evaluation's timing.

Most of an evaluation does not need the GPU to itself: setting up the task's shapes, starting the
candidate's worker, checking correctness case by case, stopping the worker. Most of that time the
GPU is idle (NVML put it at about two thirds of a batch on the H200), so a second evaluation can
do the same on the same GPU meanwhile. Timing is different: a round measured while another
process has work on the GPU measures both. So an evaluation enters the gate *shared* around
every stretch that touches the GPU and *exclusive* around its timing, and the gate lets timing in
only when no shared holder is inside; a waiting timing also stops new shared holders from
entering (writer preference), so timing waits for the stretches already under way, never for a
stream of new ones.

Shared stretches must not be entered while the same thread holds the gate exclusively, nor the
reverse: the gate is not reentrant (the pipeline leaves one stretch before it enters the next).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager


class DeviceGate:
    """A readers-writer lock with writer preference, per device; counts what it made callers wait."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._shared = 0  # holders inside a shared stretch
        self._exclusive = False  # a timing is inside
        self._exclusive_waiting = 0  # timings waiting to enter

    @contextmanager
    def shared(self) -> Iterator[float]:
        """Untimed GPU work; yields the seconds waited to enter (a timing was inside or waiting)."""
        t0 = time.monotonic()
        with self._cond:
            while self._exclusive or self._exclusive_waiting:
                self._cond.wait()
            self._shared += 1
        try:
            yield time.monotonic() - t0
        finally:
            with self._cond:
                self._shared -= 1
                self._cond.notify_all()

    @contextmanager
    def exclusive(self) -> Iterator[float]:
        """Timing: the GPU to this caller alone; yields the seconds waited for shared holders to leave."""
        t0 = time.monotonic()
        with self._cond:
            self._exclusive_waiting += 1
            try:
                while self._exclusive or self._shared:
                    self._cond.wait()
            finally:
                self._exclusive_waiting -= 1
            self._exclusive = True
        try:
            yield time.monotonic() - t0
        finally:
            with self._cond:
                self._exclusive = False
                self._cond.notify_all()

    def holders(self) -> tuple[int, bool]:
        """(shared holders inside, whether a timing is inside): for tests and diagnostics."""
        with self._cond:
            return self._shared, self._exclusive
