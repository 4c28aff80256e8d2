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

A shared holder that is only waiting for its worker's reply (a hung candidate, a slow one) need
not hold the timing up for its whole timeout. Once that reply has been awaited ``LEND_AFTER_S``,
a waiting timing stops the worker (SIGSTOP: a stopped process submits nothing) and asks the device whether it has gone
quiet; if so the holder counts as absent until the timing ends, when the worker is resumed. Its
reply is held back until then, so its evaluation does no GPU work of its own meanwhile, and the
stopped time does not count towards its timeout (host/scheduling.py). A stopped process's
kernels already on the GPU keep running, hence the check: on a GPU, NVML's utilisation samples
taken after the stop must read 0 twice in a row (``QuietGpu``); on the CPU a stopped process
uses nothing.
A device that does not go quiet gets its workers back at once and the timing waits as before.

Shared stretches must not be entered while the same thread holds the gate exclusively, nor the
reverse: the gate is not reentrant (the pipeline leaves one stretch before it enters the next).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Protocol

LEND_AFTER_S = 2.0  # a reply awaited this long may be lent to a waiting timing
RETRY_LEND_S = 2.0  # after a device that did not go quiet, wait this long before trying again
POLL_S = 0.2  # how often a waiting timing looks for a worker to lend


class Lendable(Protocol):
    def lend(self, min_wait_s: float) -> bool: ...

    def give_back(self) -> None: ...


class DeviceGate:
    """A readers-writer lock with writer preference, per device, that may lend a waiting holder.

    `quiet`: called after workers were stopped; True when the device has no work left running
    (None: never lend, timing waits for every holder)."""

    def __init__(self, quiet: Callable[[], bool] | None = None, lend_after_s: float = LEND_AFTER_S) -> None:
        self._cond = threading.Condition()
        self._shared = 0  # holders inside a shared stretch
        self._exclusive = False  # a timing is inside
        self._exclusive_waiting = 0  # timings waiting to enter
        self._workers: dict[int, Lendable] = {}  # holder thread -> the worker whose reply it awaits
        self._lent: dict[int, Lendable] = {}  # holders counted absent while the timing is inside
        self.quiet = quiet
        self.lend_after_s = lend_after_s
        self.lent_count = 0  # how many times a holder was lent (for reports and tests)

    @contextmanager
    def shared(self) -> Iterator[float]:
        """Untimed GPU work; yields the seconds waited to enter (a timing was inside or waiting)."""
        t0 = time.monotonic()
        me = threading.get_ident()
        with self._cond:
            while self._exclusive or self._exclusive_waiting:
                self._cond.wait()
            self._shared += 1
        try:
            yield time.monotonic() - t0
        finally:
            with self._cond:
                self._shared -= 1
                self._workers.pop(me, None)
                self._cond.notify_all()

    def lendable(self, worker: Lendable) -> None:
        """Within a shared stretch: while this thread awaits `worker`'s replies, a waiting timing
        may lend it (stop the worker and go ahead)."""
        with self._cond:
            self._workers[threading.get_ident()] = worker

    @contextmanager
    def exclusive(self) -> Iterator[float]:
        """Timing: the GPU to this caller alone; yields the seconds waited for shared holders to leave."""
        t0 = time.monotonic()
        next_lend = t0  # a holder qualifies by how long its own reply has been awaited
        with self._cond:
            self._exclusive_waiting += 1
            try:
                while self._exclusive or self._shared - len(self._lent):
                    self._cond.wait(POLL_S)
                    if self.quiet is not None and not self._exclusive and time.monotonic() >= next_lend:
                        waiting = {t: w for t, w in self._workers.items() if t not in self._lent}
                        if waiting:
                            self._cond.release()  # stopping and asking the device take a while
                            try:
                                lent, probed = self._lend(waiting)
                            finally:
                                self._cond.acquire()
                            self._lent.update(lent)
                            self.lent_count += len(lent)
                            if probed and not lent:  # the device stayed busy: not again at once
                                next_lend = time.monotonic() + RETRY_LEND_S
            finally:
                self._exclusive_waiting -= 1
            self._exclusive = True
        try:
            yield time.monotonic() - t0
        finally:
            with self._cond:
                self._exclusive = False
                lent, self._lent = self._lent, {}
                self._cond.notify_all()
            for w in lent.values():
                w.give_back()

    def _lend(self, waiting: dict[int, Lendable]) -> tuple[dict[int, Lendable], bool]:
        """Stop the workers whose replies have been awaited long enough; keep them stopped only if
        the device then goes quiet. Returns them, and whether the device was asked."""
        lent = {t: w for t, w in waiting.items() if w.lend(self.lend_after_s)}
        if not lent:
            return {}, False
        if not self.quiet():  # only called with a check to ask
            for w in lent.values():
                w.give_back()
            return {}, True
        return lent, True

    def holders(self) -> tuple[int, bool]:
        """(shared holders inside and not lent, whether a timing is inside): for tests and reports."""
        with self._cond:
            return self._shared - len(self._lent), self._exclusive
