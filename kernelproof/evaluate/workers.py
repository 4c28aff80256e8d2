"""Where an evaluation gets its workers: the interface an executor implements.

The local pool (kernelproof/executors/local.py) implements it with spare workers started ahead,
persistent baseline workers and a builder pool; tests implement it with doubles. The evaluation
asks, the source decides how: so the steps never know whether they run on one GPU or many.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from kernelproof.host.gate import DeviceGate
from kernelproof.host.process import WorkerProcess
from kernelproof.options import EvalOptions
from kernelproof.solution import SolutionFile

if TYPE_CHECKING:
    from kernelproof.evaluate.build import PendingBuild


class _NoHold:
    waited_s = 0.0

    def grow(self, nbytes: int, aside: bool = False) -> float:
        return 0.0


class _NoLimit:
    @contextmanager
    def hold(self, nbytes: int) -> Iterator[_NoHold]:
        yield _NoHold()


_NO_LIMIT = _NoLimit()


class WorkerSource:
    """Where an evaluation gets its workers (the local pool, or a test double)."""

    def candidate(self, device: str, timed: bool = True) -> WorkerProcess:
        """A fresh process, used once. `timed`: this evaluation will time against baseline workers."""
        raise NotImplementedError

    def baseline(self, key: tuple, device: str) -> WorkerProcess:
        """A persistent worker for this key, the caller's until :meth:`release_baseline`: no other
        evaluation loads a program into it or closes it in between."""
        raise NotImplementedError

    def release_baseline(self, worker: WorkerProcess, keep: bool = True) -> None:
        """The caller is done with a worker :meth:`baseline` gave it (after its shape's timing);
        `keep` False: close it rather than keep it idle for the key's next timing."""

    def beyond_share(self, nbytes: int | None, device: str, per_device: int) -> bool:
        """Would an evaluation holding `nbytes` of the device hold more than its share of the
        memory admitted there (its bytes, times the evaluations admitted at once, above the
        budget)? Such an evaluation holds nothing while it waits (its build), and leaves nothing
        behind (its baselines' workers, which idle with the task's weights and program on the
        device, memory no reservation counts once it has ended)."""
        capacity = getattr(self.memory(device), "capacity_bytes", None)
        if not capacity or not nbytes:
            return False
        return nbytes * max(1, per_device) > capacity

    def discard_baseline(self, key: tuple, worker: WorkerProcess | None = None) -> None:
        raise NotImplementedError

    def gate(self, device: str) -> DeviceGate:
        """The device's gate: entered shared around untimed GPU work, exclusively around timing.
        A source whose evaluations never overlap on a device may hand out a fresh gate each time."""
        return DeviceGate()

    def memory(self, device: str):
        """The device's memory admission: ``hold(nbytes)`` is a context manager that waits until
        the evaluations in flight leave room, and its reservation may grow (kernelproof/executors/device_memory.py).
        None here: no limit."""
        return _NO_LIMIT

    def settle(self, device: str) -> None:
        """Return once no worker of this source is starting on the device (before timing)."""

    def resume(self, device: str) -> None:
        """After timing: workers that :meth:`settle` paused may go on starting."""

    def build(self, solution: SolutionFile, device: str, options: EvalOptions) -> PendingBuild | None:
        """The build of the solution's bytes as its evaluation read them (CUDA and native backends),
        submitted now or earlier; None: no build step here, and the worker's import builds the
        solution itself."""
        return None
