"""How much of a GPU's memory the evaluations in flight on it may take: admission by footprint.

With two evaluations in flight per GPU (``per_device`` 2), two of KernelBench's elementwise tasks
(6.4 GB inputs) took the H200 past its memory: each evaluation holds the reference's outputs, the
float64 oracle's, the candidate's outputs coming back, and its worker holds its own copies. So an
evaluation holds a reservation from before its setup allocates anything to its end: first the
meta device's estimate of one case (kernelproof/verify/footprint.py, known before any tensor
exists), then, once setup has measured itself, its cases' footprint, and once the candidate has
passed them, its timed rounds' (kernelproof/evaluate/setup.py, kernelproof/evaluate/chain.py). Each
step waits while the reservations of the others and its own would exceed the device's memory. An
evaluation alone on a device is always admitted: what does not fit then is ``too_large``, decided
by the evaluation, not here.

A reservation that grows keeps what it holds while it waits (its setup's tensors exist). Two
evaluations that each wait to grow would wait for each other forever, so when every other holder
is itself waiting to grow, the oldest grower whose growth fits beside what is held goes ahead, and
where none fits, the oldest: the device may then be over-committed, and what fails for memory runs
again alone (kernelproof/blame.py). Growth at the timed rounds (a large task's 90 GB of cases
growing to 142 GB while smaller evaluations hold their cases' memory) makes this common; the small
one that fits goes first, and the large one grows once they have left. Growth is served before new arrivals.
A newer grower may go beside those holding now while an older one still waits for more room (a
small evaluation beside a large one, instead of behind the next large one), but each waiting
grower lets at most ``OVERTAKE_LIMIT`` others past it; after that, newer ones grow only where it
fits too, so a stream of small evaluations cannot keep a large one waiting for ever.

Arrivals are admitted oldest first, but a newer one may go past the oldest while it waits, into
room the oldest cannot use now, as long as the oldest's request still fits beside everything that
went past it: small evaluations run beside a large one's cases instead of queueing behind the next
large one (on an H200 at four in flight, 45 % of the evaluations' time was this wait), and the
large one is admitted as soon as the holders that came before it leave.

Setup reserves what the whole evaluation is expected to hold from the start (the meta device's
sizes, kernelproof/verify/footprint.py ``evaluation_bytes``), not the floor of one case: with the
floor, three of KernelBench's 6.4 GB-a-tensor tasks set up together, each then waited to grow to
its 90 GB, and an H200 sweep went 408 s without a verdict (results/h200-2026-12-02-d).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from kernelproof.host.admission import held as held_slot
from kernelproof.host.admission import stand_aside

HEADROOM = 0.92  # of the device's total memory: CUDA contexts, the allocators' caches, fragmentation
OVERTAKE_LIMIT = 8  # newer evaluations that may grow past one still waiting for room


@dataclass(frozen=True)
class MemoryState:
    """One device's memory admission at one moment (the service's gauges)."""

    capacity_bytes: int | None  # what the admission gives out (None: no admission, the CPU)
    reserved_bytes: int  # held by the evaluations admitted
    holders: int  # evaluations holding a reservation
    arriving: int  # evaluations waiting to be admitted at all
    growing: int  # evaluations holding some, waiting to hold more


class Held:
    """One evaluation's reservation: `grow` raises it to a larger figure, waiting for room."""

    def __init__(self, memory: DeviceMemory | Unlimited, ticket: int, waited_s: float) -> None:
        self._memory = memory
        self._ticket = ticket
        self.waited_s = waited_s  # the seconds waited so far, arrival and growth together

    def grow(self, nbytes: int, aside: bool = False) -> float:
        """Hold at least `nbytes` (never less than now); returns the seconds this waited.

        `aside`: the evaluation holds nothing on the device yet (its first growth, before setup
        allocates), so while it would wait it stands aside from its device slot
        (kernelproof/host/admission.py): an evaluation waiting for the memory of a large task
        lets a small one run in its place instead of holding one of ``per_device`` slots idle. On
        an H200 level 1's 90-120 GB evaluations waited 543 s in all for their memory over a 458 s
        pass at four slots, each wait a slot no other evaluation could use."""
        slot = held_slot() if aside and self._memory.would_wait(self._ticket, nbytes) else None
        with stand_aside(slot):
            waited = self._memory._grow(self._ticket, nbytes)
        self.waited_s += waited
        return waited


class DeviceMemory:
    """Reservations against one device's memory (bytes), granted in arrival order when they fit."""

    def __init__(self, capacity_bytes: int, device: str = "") -> None:
        self.capacity_bytes = capacity_bytes
        self.device = device
        _admissions.add(self)
        self._reserved: dict[int, int] = {}  # ticket -> bytes
        self._growing: dict[int, int] = {}  # ticket -> the bytes it waits to hold
        self._cond = threading.Condition()
        self._next = 0
        self._queue: list[int] = []  # tickets waiting, in arrival order
        self._overtaken: dict[int, int] = {}  # ticket waiting to grow -> newer ones grown past it
        self._arriving: dict[int, int] = {}  # ticket waiting to arrive -> the bytes it asks for
        self._beside: set[int] = set()  # admitted past the oldest arrival while it waited

    @contextmanager
    def hold(self, nbytes: int) -> Iterator[Held]:
        """Hold `nbytes` of the device for the block, as a reservation that may grow (its
        ``waited_s``: the seconds waited to get them)."""
        import time

        t0 = time.monotonic()
        with self._cond:
            ticket = self._next
            self._next += 1
            self._queue.append(ticket)
            self._arriving[ticket] = nbytes
            while not self._may_arrive(ticket, nbytes):
                self._cond.wait()
            if self._queue[0] == ticket:
                self._beside.clear()  # the oldest is in: those that went past it are holders like any
            else:
                self._beside.add(ticket)
            self._queue.remove(ticket)
            del self._arriving[ticket]
            self._reserved[ticket] = nbytes
            self._cond.notify_all()
        try:
            yield Held(self, ticket, time.monotonic() - t0)
        finally:
            with self._cond:
                del self._reserved[ticket]
                self._growing.pop(ticket, None)
                self._beside.discard(ticket)
                self._cond.notify_all()

    def _grow(self, ticket: int, nbytes: int) -> float:
        import time

        t0 = time.monotonic()
        with self._cond:
            if nbytes <= self._reserved[ticket]:
                return 0.0
            self._growing[ticket] = nbytes
            # Another grower's test reads who grows: the oldest may go on now that every other
            # holder waits to grow, a newer one may go past this one. Without this wake-up four
            # evaluations on an H200 each waited for another to be woken (results/h200-2026-12-03-e).
            self._cond.notify_all()
            try:
                while not self._may_grow(ticket, nbytes):
                    self._cond.wait()
                self._reserved[ticket] = nbytes
            finally:
                del self._growing[ticket]
                self._overtaken.pop(ticket, None)
                self._cond.notify_all()
        return time.monotonic() - t0

    def would_wait(self, ticket: int, nbytes: int) -> bool:
        """Would growing `ticket` to `nbytes` wait now? (No room beside the others' reservations
        and the older growers' requests; nothing is counted.)"""
        with self._cond:
            return nbytes > self._reserved[ticket] and not self._room(ticket, nbytes, count=False)

    def _may_grow(self, ticket: int, nbytes: int) -> bool:
        if self._room(ticket, nbytes):
            return True
        # every other holder waits to grow too: none of them releases first. The oldest grower
        # that fits beside what is held goes on (a small evaluation's timed rounds beside a large
        # one's cases, whatever its overtakes); where none fits, the oldest goes on, over-committed
        others = [t for t in self._reserved if t != ticket]
        if not all(t in self._growing for t in others):
            return False
        total = sum(self._reserved.values())
        fitting = [
            t
            for t in sorted(self._growing)
            if total - self._reserved[t] + self._growing[t] <= self.capacity_bytes
        ]
        return ticket == (fitting[0] if fitting else min(self._growing))

    def _may_arrive(self, ticket: int, nbytes: int) -> bool:
        """The oldest arrival goes in when it fits (:meth:`_fits`). A newer one goes past it while it
        waits only into room the oldest cannot use now (it does not fit) and would still have beside
        everything admitted past it: those, this one and the oldest's request together fit the
        device. So small evaluations run beside a large one's cases instead of queueing behind the
        next large one, and never delay it: once the holders that came before it leave, it fits."""
        head = self._queue[0]
        if head == ticket:
            return self._fits(ticket, nbytes)
        if self._fits(head, self._arriving[head], count=False):
            return False  # the oldest goes in now (alone, it always fits)
        beside = sum(self._reserved.get(t, 0) for t in self._beside)
        if self._arriving[head] + beside + nbytes > self.capacity_bytes:
            return False
        return self._fits(ticket, nbytes)

    def _fits(self, ticket: int, nbytes: int, count: bool = True) -> bool:
        """An arrival: alone, or holding nothing yet (it grows in turn), or with room for it."""
        return not self._reserved or nbytes == 0 or self._room(ticket, nbytes, count)

    def _room(self, ticket: int, nbytes: int, count: bool = True) -> bool:
        """Room for `ticket` to hold `nbytes`: beside the others' reservations and what older
        growers still wait for, or beside the reservations alone where no older grower could grow
        now and each has let fewer than ``OVERTAKE_LIMIT`` others past it (then counted one more)."""
        held = sum(n for t, n in self._reserved.items() if t != ticket)
        older = [t for t in self._growing if t < ticket]
        ahead = sum(max(0, self._growing[t] - self._reserved[t]) for t in older)
        if held + ahead + nbytes <= self.capacity_bytes:
            return True
        total = sum(self._reserved.values())
        stuck = all(total - self._reserved[t] + self._growing[t] > self.capacity_bytes for t in older)
        if (
            held + nbytes <= self.capacity_bytes
            and stuck
            and all(self._overtaken.get(t, 0) < OVERTAKE_LIMIT for t in older)
        ):
            for t in older if count else ():
                self._overtaken[t] = self._overtaken.get(t, 0) + 1
            return True
        return False

    def reserved_bytes(self) -> int:
        with self._cond:
            return sum(self._reserved.values())

    def state(self) -> MemoryState:
        """What is held and who waits, read at once."""
        with self._cond:
            return MemoryState(
                self.capacity_bytes,
                sum(self._reserved.values()),
                len(self._reserved),
                len(self._queue),
                len(self._growing),
            )

    def describe(self) -> str:
        """One line on who holds what and who waits (a long sweep's heartbeat)."""
        with self._cond:
            held = sorted(self._reserved.values(), reverse=True)
            growing = [n for _, n in sorted(self._growing.items())]
            arriving = len(self._queue)
        gb = lambda n: f"{n / 1e9:.1f}"  # noqa: E731
        return (
            f"{self.device or 'device'}: {gb(sum(held))} of {gb(self.capacity_bytes)} GB reserved by "
            f"{len(held)} ({', '.join(map(gb, held)) or '-'}); waiting to grow to: "
            f"{', '.join(map(gb, growing)) or '-'}; waiting to arrive: {arriving}"
        )


_admissions: weakref.WeakSet[DeviceMemory] = weakref.WeakSet()


def admissions() -> list[DeviceMemory]:
    """Every device admission alive in this process."""
    return list(_admissions)


class Unlimited:
    """No admission by memory (the CPU, test doubles): every reservation is granted at once."""

    @contextmanager
    def hold(self, nbytes: int) -> Iterator[Held]:
        yield Held(self, 0, 0.0)

    def _grow(self, ticket: int, nbytes: int) -> float:
        return 0.0

    def would_wait(self, ticket: int, nbytes: int) -> bool:
        return False

    def state(self) -> MemoryState:
        return MemoryState(None, 0, 0, 0, 0)


def for_device(device: str) -> DeviceMemory | Unlimited:
    """The admission for a device: its total memory on a GPU, none on the CPU."""
    if not device.startswith("cuda"):
        return Unlimited()
    import torch

    total = torch.cuda.get_device_properties(torch.device(device)).total_memory
    return DeviceMemory(int(total * HEADROOM), device)
