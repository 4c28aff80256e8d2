"""How many evaluations run on a device at once (``per_device``), and who may step aside.

An evaluation holds one of its device's slots from its setup to its verdict. Most of that time it
uses the device, but a solution that asks for a build while it runs (``load_inline`` in
``__init__`` or on the first forward, docs/builds.md) then only waits for a compiler, tens of
seconds for CUDA, with the device idle and, at ``per_device`` 1, every other evaluation waiting
behind it. So such an evaluation steps aside while its build runs (:meth:`Admission.aside`): its
slot lets another evaluation in, and when its build is done it comes back at once, without
waiting, so that no evaluation holding GPU memory ever waits for a slot (a slot taken by one
waiting for that memory would never come free). For that moment more than ``per_device``
evaluations may be running: the slots are a throttle. What keeps timing honest is the device's
gate (kernelproof/host/gate.py), which every evaluation passes whatever its admission, and what
keeps memory in bounds is the memory admission (kernelproof/executors/device_memory.py).

An evaluation that needs the device alone (the re-run of a failure with nothing beside it,
kernelproof/blame.py) waits until no evaluation is running or standing aside: one standing aside
still holds its worker and its memory on the device.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass

# The admission whose slot this thread's evaluation holds (None: none, or the device alone).
_held: contextvars.ContextVar[Admission | None] = contextvars.ContextVar(
    "kernelproof_admission", default=None
)


@dataclass(frozen=True)
class SlotState:
    """One device's admission at one moment (the service's gauges, kernelproof/serve/prometheus.py)."""

    slots: int  # ``per_device``
    running: int  # evaluations holding a slot (may exceed ``slots`` for a moment: see the module)
    aside: int  # evaluations standing aside: their slots lent while they wait for a build or memory
    alone: bool  # an evaluation has the device alone, or waits for it to empty (new ones wait)


class Admission:
    """At most ``slots`` evaluations running on one device; any number standing aside."""

    def __init__(self, slots: int) -> None:
        if slots < 1:
            raise ValueError(f"a device admits at least one evaluation, not {slots}")
        self.slots = slots
        self.running = 0
        self.aside_now = 0  # evaluations waiting for a build, their slots lent
        self._alone = False  # an evaluation has the device alone, or is draining it
        self._alone_lock = threading.Lock()  # one evaluation drains the device at a time
        self._changed = threading.Condition()

    @property
    def free(self) -> int:
        """Slots a new evaluation could take now."""
        with self._changed:
            return 0 if self._alone else max(0, self.slots - self.running)

    def state(self) -> SlotState:
        """Who runs, who stands aside and whether the device is held alone, read at once."""
        with self._changed:
            return SlotState(self.slots, self.running, self.aside_now, self._alone)

    @contextmanager
    def slot(self) -> Iterator[None]:
        """One slot, for one evaluation, waited for."""
        with self._changed:
            self._changed.wait_for(lambda: not self._alone and self.running < self.slots)
            self.running += 1
        token = _held.set(self)
        try:
            yield
        finally:
            _held.reset(token)
            with self._changed:
                self.running -= 1
                self._changed.notify_all()

    @contextmanager
    def alone(self) -> Iterator[None]:
        """The device with no other evaluation on it: new ones wait, and those running or standing
        aside finish first."""
        with self._alone_lock:
            with self._changed:
                self._alone = True
                try:
                    self._changed.wait_for(lambda: self.running == 0 and self.aside_now == 0)
                except BaseException:
                    self._alone = False
                    self._changed.notify_all()
                    raise
            token = _held.set(None)  # alone, nobody is let in: nothing to step aside for
            try:
                yield
            finally:
                _held.reset(token)
                with self._changed:
                    self._alone = False
                    self._changed.notify_all()

    @contextmanager
    def aside(self) -> Iterator[None]:
        """Lend this evaluation's slot while it waits for something that is not the device (a
        build), and take it back on return without waiting."""
        with self._changed:
            self.running -= 1
            self.aside_now += 1
            self._changed.notify_all()
        try:
            yield
        finally:
            with self._changed:
                self.aside_now -= 1
                self.running += 1  # may exceed the slots for a moment; never waits (see above)
                self._changed.notify_all()


def held() -> Admission | None:
    """The admission whose slot this thread's evaluation holds (None outside any, or alone)."""
    return _held.get()


def stand_aside(admission: Admission | None) -> AbstractContextManager[None]:
    """Step aside from `admission`'s slot (from :func:`held`) while waiting; a no-op for None."""
    return admission.aside() if admission is not None else nullcontext()
