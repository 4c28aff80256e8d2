"""The two kinds of turn an evaluation takes on its device: shared, beside other evaluations'
untimed work, and alone, for timing (kernelproof/host/gate.py).

Timing's own preparation is untimed work: the candidate's program loaded for a shape, the
baselines' workers taken (or started) and their programs loaded. It takes a shared turn, so the
device is held alone only for what measures: the warm-up, the rounds, the parent's checks, the
steady regime and the profile. On an H100 with four evaluations in flight, the loads and the
baselines' starts were 1.5 to 5 s of each 10 to 13 s stretch that every other evaluation waited on.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass

from kernelproof.evaluate.workers import WorkerSource
from kernelproof.host.gate import Lendable
from kernelproof.verify import steps


@dataclass
class DeviceTurns:
    """An evaluation's turns on `device`; waits are the steps ``device_wait`` and ``timing_wait``.

    `first_alone`: called once, when the evaluation first has the device alone (the phase mark)."""

    workers: WorkerSource
    device: str
    first_alone: Callable[[], None] | None = None

    @contextmanager
    def shared(self, lend: Lendable | None = None) -> Iterator[None]:
        """Untimed GPU work: waits while another evaluation times. `lend`: the worker whose replies
        this turn awaits, which a waiting timing may stop once a reply is long awaited (a hang)."""
        with steps.entered(self.workers.gate(self.device).shared(), "device_wait"):
            if lend is not None:
                self.lend(lend)
            yield

    def lend(self, worker: Lendable) -> None:
        """Within a shared turn: `worker`'s replies are what it awaits from here on (host/gate.py)."""
        self.workers.gate(self.device).lendable(worker)

    @contextmanager
    def alone(self) -> Iterator[None]:
        """Timing: every other evaluation's GPU stretch over, and no worker of the pool still
        starting (those are stopped until the turn ends)."""
        gate = self.workers.gate(self.device)
        with ExitStack() as turn:
            with steps.step("timing_wait"):
                turn.enter_context(gate.exclusive())
                self.workers.settle(self.device)
            turn.callback(self.workers.resume, self.device)
            if self.first_alone is not None:
                self.first_alone()
                self.first_alone = None
            yield
