"""One correctness case: the call run ``repeats`` times on fresh allocations over poisoned memory.

Run 1 gets the case's inputs in fresh storage; run 2 gets the same values written into the
previous case's input buffers (:mod:`kernelproof.worker.addresses`, B1). Before each run the
allocator is poisoned (:mod:`kernelproof.worker.poison`); after it, every check of
:mod:`kernelproof.worker.checks` runs, and the results are compared in count, dtype and shape with
the reference's (:mod:`kernelproof.wire.expected`) before any is copied. Each run's results are
copied out right after it, so a solution that returns one buffer from both runs is judged on what
each returned (and the reply says ``output_reused``). A large case's inputs are drawn here from
their seed, once (run 2 takes run 1's saved copies), and its run 2 answers with a fingerprint;
large outputs of run 1 may be handed over on the device (:mod:`kernelproof.wire.handoff`). A
large case first lets the previous case's buffers go, all but the first-run inputs run 2 needs:
on an H200 a case of 6.4 GB tensors held 82.9 GB in the worker before (KernelBench level 1's
20_LeakyReLU), most of it copies no check needed.
"""

from __future__ import annotations

import time
from typing import Any

import torch

from kernelproof import numeric_flags
from kernelproof.inputs import InputSlot, case_inputs, checksum, fingerprint
from kernelproof.verdict import ReasonCode
from kernelproof.wire.expected import Expected, Spec, refusal
from kernelproof.wire.replies import failure
from kernelproof.worker import addresses, calls, checks, poison
from kernelproof.worker.checks import hooks, reuse
from kernelproof.worker.state import WorkerState


def run(state: WorkerState, h: dict[str, Any], tensors: list[torch.Tensor]):
    """The reply to a ``run`` request: run 1's results (and run 2's, unless it answers by fingerprint)."""
    expected = Expected.from_json(h.get("expect"))
    flags_target = numeric_flags.target(state.precision)
    if h.get("draw"):  # a large case: the last case's buffers go, all but its first run's inputs (B1)
        state.keep = []
    case = _Case(state, h, tensors)
    for repeat in range(int(h.get("repeats", 2))):
        try:
            args, originals = case.inputs(repeat)
        except _Unmapped as exc:  # the parent sends them again over the wire
            # Read as a failure only where the parent lent nothing (kernelproof.host.process,
            # request_outputs): then the claim is a result owed and not delivered, the candidate's.
            # Out of device memory it is a crash, which the parent's own facts weigh (run again
            # alone beside neighbours, the reference's re-run near the edge: kernelproof/blame.py).
            code = ReasonCode.CRASH if exc.out_of_memory else ReasonCode.MISSING_RESULT
            message = f"could not place the case's inputs on {state.device}: {exc}"
            return failure(code, message, handoff="failed"), []
        with hooks.quiet():
            poison.fill(state.device, h.get("poison_bytes", []))
        case.lap("poison")
        threads_before = state.thread_state()
        try:
            out = calls.call(state, args)
            if state.device.type == "cuda":
                torch.cuda.synchronize(state.device)
        except BaseException as exc:  # noqa: BLE001 - every failure of solution code is a reply
            return calls.call_failure(exc, "forward", state.solution_path), []
        case.lap("call")
        refused = checks.after_call(state, out, args, originals, threads_before, flags_target)
        if refused is None and expected is not None:
            refused = _unexpected(expected, calls.results(state, out, args), repeat)
        if refused is not None:
            return refused, []
        case.lap("checks")
        case.take(repeat, out, args)
    return case.finish()


class _Unmapped(Exception):
    """A case's input could not be placed on the device here: lent by the parent and not mapped,
    or sent over the wire and not copied (`out_of_memory`: the device had no room for it)."""

    def __init__(self, message: str, out_of_memory: bool = False) -> None:
        super().__init__(message)
        self.out_of_memory = out_of_memory


class _Case:
    """One ``run`` request's runs: their inputs, the results copied out, where the time went."""

    def __init__(self, state: WorkerState, h: dict[str, Any], tensors: list[torch.Tensor]):
        self.state = state
        self.h = h
        self.tensors = tensors
        self.second_fp = h.get("second_run_projection")  # a large output: run 2 answers with a fingerprint
        self.into = h.get("into") if self.second_fp is not None else None  # run 1's outputs on the device
        self.reply: dict[str, Any] = {"ok": True, "second_run_fingerprints": [], "checksums": []}
        self.outs: list[torch.Tensor] = []
        self.keep: list[tuple[list[Any], Any]] = []  # (args, out) of each run: kept alive (B1)
        self.sent: dict[int, torch.Tensor] | None = None
        self.first_inputs: list[Any] = []
        # a large case's run 1: its arguments (tensors left out) and their saved copies
        self.drawn: tuple[list[Any], list[tuple[int, torch.Tensor]]] | None = None
        self.steps: dict[str, float] = {}  # where this request's time went, for the cost benchmark
        self.t = time.perf_counter()

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        self.steps[name] = self.steps.get(name, 0.0) + now - self.t
        self.t = now

    def inputs(self, repeat: int) -> tuple[list[Any], list[tuple[int, torch.Tensor]]]:
        """Run ``repeat``'s arguments, and the saved originals the input check compares with."""
        self.t = time.perf_counter()
        h = self.h
        with hooks.quiet():
            if h.get("draw") and repeat > 0 and self.drawn is not None:
                args, originals = self._again(*self.drawn)
                self.reply["checksums"].append(checksum(args))
                self.lap("inputs")
                return args, originals
            if h.get("draw"):
                args, originals = _drawn(self.state, h["draw"])
                self.reply["checksums"].append(checksum(args))
                self.drawn = ([None if isinstance(a, torch.Tensor) else a for a in args], originals)
            else:
                if self.sent is None:  # onto the device once; the saved copies stay there for the comparison
                    try:
                        self.sent = _received(self.state, h["args"], self.tensors, h.get("from"))
                    except Exception as exc:  # noqa: BLE001
                        raise _Unmapped(str(exc), isinstance(exc, torch.OutOfMemoryError)) from None
                args = [self.sent[a["t"]].clone() if "t" in a else a["v"] for a in h["args"]]
                originals = [(i, self.sent[a["t"]]) for i, a in enumerate(h["args"]) if "t" in a]
            if repeat == 0:
                self.first_inputs = args
            else:
                args = addresses.earlier(self.state.earlier_inputs, args)
        self.lap("inputs")
        return args, originals

    def _again(
        self, template: list[Any], originals: list[tuple[int, torch.Tensor]]
    ) -> tuple[list[Any], list[tuple[int, torch.Tensor]]]:
        """A large case's later run: run 1's values (its saved copies, which the input check has
        just found intact) written into the previous case's first-run buffers (B1), and the same
        copies to compare with. Drawn again and copied again, they held two more copies of every
        input at once (a 6.4 GB input on an H200: 12.8 GB more)."""
        values = list(template)
        for i, saved in originals:
            values[i] = saved
        placed = addresses.earlier(self.state.earlier_inputs, values)
        if placed is values:  # no earlier buffers of that form: fresh storage, never the saved copies
            placed = [torch.Tensor.clone(v) if isinstance(v, torch.Tensor) else v for v in values]
        return placed, originals

    def take(self, repeat: int, out: Any, args: list[Any]) -> None:
        """Copy run ``repeat``'s results out now (the next run may write into the same buffers)."""
        state = self.state
        results = calls.results(state, out, args)
        with hooks.quiet():
            if self.keep and reuse.shared_with(
                results, [calls.results(state, self.keep[-1][1], self.keep[-1][0])]
            ):
                self.reply["output_reused"] = True  # run 1's results were copied out before run 2
                state.reuses_outputs = True
            if self.second_fp is not None and repeat == 1:
                self.reply["second_run_fingerprints"] = [fingerprint(x, int(self.second_fp)) for x in results]
                self.lap("fingerprint")
            elif self.into and repeat == 0:
                self.reply["delivered"], wire = state.hand_over(results, self.into)
                self.outs.extend(x.to("cpu") for x in wire)
                self.lap("handoff")
            else:
                self.outs.extend(x.detach().to("cpu") for x in results)
                self.lap("to host")
        self.keep.append((args, out))

    def finish(self) -> tuple[dict[str, Any], list[torch.Tensor]]:
        self.state.keep = self.keep
        self.state.earlier_inputs = self.first_inputs
        self.reply["steps_s"] = {k: round(v, 6) for k, v in self.steps.items()}
        return self.reply, self.outs


def _drawn(state: WorkerState, draw: dict[str, Any]) -> tuple[list[Any], list[tuple[int, torch.Tensor]]]:
    """A large case's inputs, drawn here from the parent's seed, and copies of them for the input check."""
    slots = [InputSlot(**x) for x in draw["slots"]]
    scalars = {int(k): v for k, v in draw["scalars"].items()}
    args = case_inputs(slots, scalars, draw["distribution"], int(draw["seed"]), state.device)
    return args, [(i, a.clone()) for i, a in enumerate(args) if isinstance(a, torch.Tensor)]


def _received(
    state: WorkerState,
    spec: list[dict[str, Any]],
    tensors: list[torch.Tensor],
    lent: list[dict[str, Any]] | None,
) -> dict[int, torch.Tensor]:
    """The request's tensors on this worker's device, by index: lent ones cloned from the
    parent's device buffers (kernelproof.wire.handoff), the others copied from the wire."""
    by_index = {d.get("t"): d for d in lent or [] if isinstance(d, dict)}
    out = {}
    for a in spec:
        if "t" in a:
            k = a["t"]
            out[k] = (
                state.outbox_for_device().borrow(by_index[k])
                if k in by_index
                else tensors[k].to(state.device)
            )
    return out


def _unexpected(expected: Expected, results: list[Any], repeat: int) -> dict[str, Any] | None:
    """A failed reply when the results differ from the reference's in count, dtype or shape."""
    found = refusal(expected.outputs, [Spec.of(t) for t in results])
    if found is None:
        return None
    code, message = found
    return failure(code, f"run {repeat + 1}: {message}")
