"""How much of a GPU's memory the evaluations in flight on it may take: admission by footprint.

With two evaluations in flight per GPU (``per_device`` 2), two of KernelBench's elementwise tasks
(6.4 GB inputs) took the H200 past its memory: each evaluation holds the reference's outputs, the
float64 oracle's, the candidate's outputs coming back, and its worker holds its own copies. So an
evaluation reserves its footprint (kernelproof/evaluate/setup.py estimates it from what its setup
measured) before its candidate runs, and waits while the reservations of the others and its own
would exceed the device's memory. An evaluation alone on a device is always admitted: what does
not fit then is ``too_large``, decided by the evaluation, not here.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

HEADROOM = 0.92  # of the device's total memory: CUDA contexts, the allocators' caches, fragmentation


class DeviceMemory:
    """Reservations against one device's memory (bytes), granted in arrival order when they fit."""

    def __init__(self, capacity_bytes: int) -> None:
        self.capacity_bytes = capacity_bytes
        self._reserved: dict[int, int] = {}  # ticket -> bytes
        self._cond = threading.Condition()
        self._next = 0
        self._queue: list[int] = []  # tickets waiting, in arrival order

    @contextmanager
    def reserve(self, nbytes: int) -> Iterator[float]:
        """Hold `nbytes` of the device for the block; yields the seconds waited to get them."""
        import time

        t0 = time.monotonic()
        with self._cond:
            ticket = self._next
            self._next += 1
            self._queue.append(ticket)
            while self._queue[0] != ticket or not self._fits(nbytes):
                self._cond.wait()
            self._queue.pop(0)
            self._reserved[ticket] = nbytes
            self._cond.notify_all()
        try:
            yield time.monotonic() - t0
        finally:
            with self._cond:
                del self._reserved[ticket]
                self._cond.notify_all()

    def _fits(self, nbytes: int) -> bool:
        held = sum(self._reserved.values())
        return not self._reserved or held + nbytes <= self.capacity_bytes

    def reserved_bytes(self) -> int:
        with self._cond:
            return sum(self._reserved.values())


class Unlimited:
    """No admission by memory (the CPU, test doubles): every reservation is granted at once."""

    @contextmanager
    def reserve(self, nbytes: int) -> Iterator[float]:
        yield 0.0


def for_device(device: str) -> DeviceMemory | Unlimited:
    """The admission for a device: its total memory on a GPU, none on the CPU."""
    if not device.startswith("cuda"):
        return Unlimited()
    import torch

    total = torch.cuda.get_device_properties(torch.device(device)).total_memory
    return DeviceMemory(int(total * HEADROOM))
