"""What one worker process remembers between requests: the loaded program and the buffers it keeps.

One instance per process, made by the message loop and handed to each request's handler; nothing
here lives in a module, so solution code cannot reach it without frame walking or gc (both
forbidden by the audit hook). The checks the worker arms before the candidate is imported are
closures kept here for the same reason.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from kernelproof.inputs import KEPT_BATCH_BYTES
from kernelproof.sandbox import guards
from kernelproof.wire import handoff
from kernelproof.wire.handoff import Outbox
from kernelproof.worker.launches import Launches


def held_bytes(kept: Any) -> int:
    """Bytes held by the tensors in `kept` (nested lists and tuples): the larger of two counts, the
    distinct storages (each once however many views share it) and each distinct tensor by its
    shape (as the parent's reservation counts a batch: kernelproof/verify/footprint.py,
    ``timed_worker_share``). So a batch is kept only where the parent counted it: an output
    written into its input (one storage, two tensors) was kept here by its storages and left out
    there by its shapes."""
    storages: dict[int, int] = {}
    shaped: dict[int, int] = {}
    stack = [kept]
    while stack:
        x = stack.pop()
        if isinstance(x, torch.Tensor):
            shaped[id(x)] = x.numel() * x.element_size()
            try:
                storage = x.untyped_storage()
                storages[storage.data_ptr()] = storage.nbytes()
            except (RuntimeError, NotImplementedError):  # no plain storage: its own size, by identity
                storages[-id(x) - 1] = shaped[id(x)]
        elif isinstance(x, (list, tuple)):
            stack.extend(x)
    return max(sum(storages.values()), sum(shaped.values()))


def _off(on: bool) -> None:
    """The audit hook's switch before it is armed (a baseline worker never arms it)."""


def _nothing() -> list[str]:
    return []


def _no_hooks(full: bool = True) -> list[str]:
    return []


@dataclass
class WorkerState:
    role: str  # "candidate" | "baseline"
    private_dir: str  # the worker's private directory: the only place it may write
    deny_read: tuple[str, ...]  # paths the worker must never read
    profiler_warm_s: float | None = None  # seconds of the start-up profiler session, or None
    # Armed once, before the first line of candidate code runs (kernelproof.worker.loading).
    armed: bool = False
    switch: Callable[[bool], None] = _off  # marks when solution code runs (labels the audit hook's reports)
    integrity: Callable[[], list[str]] = _nothing  # harness functions the solution replaced
    hooked: Callable[[bool], list[str]] = _no_hooks  # hooks left active in the harness's torch calls
    launches: Launches | None = None  # the solution's launches marked on the CPU (None: not wrapped)
    # Sends a message the worker starts itself mid-request (a build request) and returns the parent's
    # answer, leaving the request in flight as it was; set by the loop.
    ask: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    # The program loaded by the last load request.
    model: Any = None  # the module
    fn: Any = None  # what a call runs: the module, or its torch.compile wrapper (baselines)
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))
    dtype: torch.dtype = torch.float32
    precision: str = "fp32"  # the precision contract; the numeric flags it pins are re-checked
    inplace: tuple[int, ...] = ()  # arguments the task updates in place (their values are results)
    solution_path: str = ""  # the file solution code runs from (errors point at its lines)
    # The solution's module by (path, sha256 of its bytes): imported once per worker, its ModelNew
    # built again for each shape variant (kernelproof.worker.program.load_candidate)
    imported: dict[tuple[str, str], Any] = field(default_factory=dict)
    clock: Any = None  # CudaClock or CpuClock (kernelproof.worker.clock)
    prebuilt: bool = False  # load_inline routed to kernelproof.build.inline (the parent built it)
    # Buffers kept between requests.
    keep: list[Any] = field(default_factory=list)  # earlier buffers stay alive: no address reuse (B1)
    earlier_inputs: list[Any] = field(default_factory=list)  # the last case's first-run inputs (B1)
    timed: list[list[torch.Tensor] | None] = field(
        default_factory=list
    )  # the last batch's results, for fetch
    reuses_outputs: bool = False  # a timed call returned storage an earlier one did (B4): results are copied
    outbox: Outbox | None = None  # copies large outputs into the parent's device buffers
    # Sends one message mid-request and returns the parent's answer (a time batch's steps); set by the loop.
    channel: Callable[[dict[str, Any]], dict[str, Any]] | None = None

    @property
    def candidate(self) -> bool:
        return self.role == "candidate"

    def let_go(self, program: bool = False) -> None:
        """The buffers kept between requests (B1's, the last batch's results) dropped, and the
        program too where asked; the allocator's cached blocks handed back to the device. A
        resting baseline keeps its program (message_loop.rest); a candidate loading for its timed
        rounds does not (loading._let_go)."""
        if program:
            self.model = self.fn = None
        self.keep = []
        self.earlier_inputs = []
        self.timed = []
        if self.device.type == "cuda":
            torch.cuda.empty_cache()

    def let_go_of_a_large_batch(self) -> None:
        """Before a timed request draws its inputs: the last batch's buffers go where they hold
        more than :data:`~kernelproof.inputs.KEPT_BATCH_BYTES` (no device cache emptied: the next
        batch takes the same blocks from this process's allocator, never from the driver inside a
        window).

        Why: kept while the next batch was drawn, two batches sat in each timed worker at once, and
        the timed rounds' reservation counts one (kernelproof/verify/footprint.py). Every timed
        call's output is checked against the oracle (its fingerprint), so a result served by an
        address that repeats is a wrong result there; a small batch is still kept, as before."""
        if held_bytes([self.keep, self.timed]) > KEPT_BATCH_BYTES:
            self.keep = []
            self.timed = []

    def thread_state(self) -> tuple[set[int], int]:
        """Live Python threads, and how many threads solution code has started so far."""
        starts = getattr(self.switch, "thread_starts", None)
        return guards.python_threads(), (starts() if starts else 0)

    def threads_started(self, before: tuple[set[int], int]) -> int:
        """Threads started since ``before``: new live ones, or ones started and already finished (C2)."""
        live, starts = self.thread_state()
        return max(len(live - before[0]), starts - before[1])

    def outbox_for_device(self) -> Outbox:
        """The handoff's worker side, made on first use: CuPy is imported only by workers that hand over."""
        if self.outbox is None:
            self.outbox = Outbox(self.device)
        return self.outbox

    def hand_over(
        self, results: list[Any], into: list[dict[str, Any]]
    ) -> tuple[list[int], list[torch.Tensor]]:
        """(slots delivered into the parent's device buffers, the results that still take the wire)."""
        if self.device.type != "cuda" or not handoff.available():
            return [], [t.detach() for t in results]
        return self.outbox_for_device().deliver(results, into)
