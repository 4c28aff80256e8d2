"""Timed calls in a worker: the cold regime (one window per call) and the steady regime (back to back).

``time``: each call gets fresh inputs drawn from its own seed just before it (I4), its own window
(:mod:`kernelproof.worker.clock`), and, right after the window closes and before the next call's
inputs are written, a fingerprint of its results. The seeds arrive one at a time (I10): the
request carries the first call's seed; after each window the worker says ``closed`` and is sent
that call's projection seed (``project``), answers with the fingerprint, and only then is sent the
next call's seed (``next``) or ``end``. So no future input and no projection exists in this process
while a call runs: a solution that reads the harness's memory finds only the call in hand. Fingerprinting each output after its own call
judges a solution that returns one buffer from every call (the CUDA-graph pattern, B4) on what
each call returned; the reply counts such calls (``output_reused``) and names those whose full
output a later call overwrote before the worker began keeping copies (``lost``), which the parent
then never asks to re-check in full. Before each fingerprint the worker looks for replaced harness
code and for hooks left in the harness's torch calls (:func:`kernelproof.worker.checks.harness_intact`).

``steady``: the calls back to back, one figure for the batch. Every call gets values of its own
(one draw for the batch, :func:`kernelproof.inputs.timed_input_batch`), so an output cache keyed on
its inputs never hits; every call's outputs are kept and fingerprinted after the batch, and the
reply carries every fingerprint, so that the parent can check calls it picks after the reply (a
call that skipped its work is found there, whichever it was). Over four rotating input sets with
only the last output checked, a cache keyed on the inputs' addresses and a few of their values
answered a 256x256 matmul's steady batch 5.6-48x faster than eager on the CPU.
"""

from __future__ import annotations

import time
from typing import Any

import torch

from kernelproof.inputs import (
    STEADY_WARMUP_CALLS,
    InputSlot,
    fingerprint,
    fingerprints,
    timed_input_batch,
    timed_inputs,
)
from kernelproof.verdict import ReasonCode
from kernelproof.wire.replies import failure
from kernelproof.worker import calls, checks, clock
from kernelproof.worker.checks import hooks, reuse, shadows, threads
from kernelproof.worker.state import WorkerState


class Refused(Exception):
    """A harness step found a failure between timed calls; the batch ends with this reply."""

    def __init__(self, reply: dict[str, Any]):
        super().__init__(reply.get("message", ""))
        self.reply = reply


def time_calls(state: WorkerState, h: dict[str, Any], tensors: list[torch.Tensor]):
    """The reply to a ``time`` request (after its per-call steps): per-call times and what the clock saw."""
    slots, fixed, scalars = input_spec(h, tensors)
    n = int(h["calls"])
    if not 1 <= n <= MAX_CALLS or state.channel is None:
        return failure(ReasonCode.INTERNAL_ERROR, f"a time request for {n} calls cannot be served"), []
    state.let_go_of_a_large_batch()  # before this batch's first inputs are drawn
    batch = _Batch(state, n, int(h["seed"]))

    def prepare(i: int) -> None:
        with hooks.quiet():
            batch.inputs[i] = timed_inputs(slots, fixed, scalars, batch.seeds[i], state.device)

    run = [(lambda i=i: calls.call(state, batch.inputs[i])) for i in range(n)]
    threads_before = state.thread_state()
    timer = state.clock  # read once: what is checked is what runs
    swapped = clock.replaced(timer)
    if swapped:
        return failure(ReasonCode.TIMING_TAMPER, f"{swapped} (replaced before this timed request)"), []
    t0 = time.perf_counter()
    try:
        with hooks.collector_off():  # no finaliser of the solution's between a window and its fingerprint
            outs, samples = timer.run(run, prepare, batch.after)
    except Refused as refused:
        return refused.reply, []
    except BaseException as exc:  # noqa: BLE001
        return calls.call_failure(exc, "a timed call", state.solution_path), []
    wall_ms = (time.perf_counter() - t0) * 1e3
    swapped = clock.replaced(timer)
    if swapped:  # during the batch: its own figures are those of the clock that was there
        return failure(ReasonCode.TIMING_TAMPER, f"{swapped} (during a timed request)"), []
    found = checks.harness_intact(state, timing=True) or threads.check(state, threads_before, "timed calls")
    if found is not None:
        return found, []
    state.keep = list(zip(batch.inputs, outs))
    state.timed = batch.kept
    return {
        "ok": True,
        "span_ms": [s.span_ms for s in samples],
        "event_ms": [s.event_ms for s in samples],
        "activities": [s.kernels for s in samples],
        "output_reused": batch.reused,
        "lost": sorted(batch.lost),
        "wall_ms": wall_ms,
        "host_ms": [s.host_ms for s in samples],
        "harness_ms": getattr(timer, "breakdown_ms", {}),
        "clock": timer.name,
    }, []


MAX_CALLS = 100_000  # calls one time request may ask for


class _Batch:
    """One ``time`` request's calls: their inputs, and what the harness saw right after each."""

    def __init__(self, state: WorkerState, n: int, first_seed: int):
        self.state = state
        self.seeds: list[int] = [first_seed]  # grows by one seed per closed window
        n = int(n)
        self.n = n
        self.inputs: list[list[Any]] = [[] for _ in range(n)]
        self.fingerprints: list[list[list[float]]] = [[] for _ in range(n)]
        self.returned: list[list[Any] | None] = [None] * n  # each call's results as returned
        self.kept: list[list[Any] | None] = [None] * n  # ... or copies, once outputs are reused
        self.reused = 0  # calls whose results share storage with an earlier call's
        self.lost: set[int] = set()  # calls whose results a later call overwrote, uncopied

    def after(self, i: int, out: Any) -> None:
        """Right after call ``i``'s window, before the next call's inputs: say the window closed,
        take the projection seed, check and fingerprint, send it, then take the next seed."""
        state = self.state
        # Looked for before the worker waits on the parent: a signal handler left by the call would
        # run inside that wait, before the fingerprint (kernelproof.worker.checks.signals).
        refused = checks.harness_intact(state, timing=True)
        if refused is not None:
            raise Refused(refused)
        projection = _step(state, {"step": "closed", "index": i}, "project", "projection_seed")
        self._fingerprint(i, out, projection)
        following = "next" if i + 1 < self.n else "end"
        seed = _step(
            state, {"step": "fingerprint", "index": i, "fingerprints": self.fingerprints[i]}, following
        )
        if seed is not None:
            self.seeds.append(seed)

    def _fingerprint(self, i: int, out: Any, projection: int) -> None:
        state = self.state
        with hooks.quiet():
            flat = calls.results(state, out, self.inputs[i])
            if any(type(t) is not torch.Tensor for t in flat):
                raise Refused(failure(ReasonCode.WRONG_TYPE, "a timed call returned a non-tensor"))
            refused = shadows.check(flat, "a timed output")
            if refused is not None:
                raise Refused(refused)
            self.fingerprints[i] = [fingerprint(t, projection) for t in flat]
            overwritten = reuse.shared_with(flat, self.returned[:i])
            if overwritten:
                self.reused += 1
                for k in overwritten:
                    if self.kept[k] is self.returned[k]:  # not copied: its values are call i's now
                        self.lost.add(k)
                        self.kept[k] = None
                state.reuses_outputs = True
            self.returned[i] = flat
            self.kept[i] = [t.clone() for t in flat] if state.reuses_outputs else flat


def _step(state: WorkerState, said: dict[str, Any], op: str, key: str = "seed") -> int | None:
    """Send one step of a batch and take the parent's answer: ``op``'s integer ``key`` (None for
    ``end``). Anything else ends the batch (the parent sends nothing else mid-batch)."""
    header = state.channel(said)
    if header.get("op") != op:
        raise Refused(
            failure(ReasonCode.INTERNAL_ERROR, f"expected {op!r} mid-batch, got {header.get('op')!r}")
        )
    if op == "end":
        return None
    value = header.get(key)
    if type(value) is not int:
        raise Refused(failure(ReasonCode.INTERNAL_ERROR, f"a {op!r} step without an integer {key!r}"))
    return value


def steady(state: WorkerState, h: dict[str, Any], tensors: list[torch.Tensor]):
    """Back-to-back throughput (warm caches, launch overlap): the steady regime, and the parent's
    back-to-back bound (kernelproof/measure/bounds.py). Every call on values of its own, every
    output kept and fingerprinted once the batch is over."""
    slots, fixed, scalars = input_spec(h, tensors)
    n = int(h["calls"])
    state.let_go_of_a_large_batch()
    with hooks.quiet():
        sets = timed_input_batch(slots, fixed, scalars, int(h["seed"]), n + STEADY_WARMUP_CALLS, state.device)
    with hooks.collector_off():  # as in a time batch: nothing of the solution's runs before the fingerprints
        return _steady(state, h, sets[:n], sets[n:])


def _steady(state: WorkerState, h: dict[str, Any], sets: list[list[Any]], warmup: list[list[Any]]):
    try:
        reused = _warm_up(state, warmup)
        outs, total_ms = _back_to_back(state, sets, copy=reused)
    except Refused as refused:
        return refused.reply, []
    except BaseException as exc:  # noqa: BLE001
        return calls.call_failure(exc, "a steady-state call", state.solution_path), []
    found = checks.harness_intact(state, timing=True)
    if found is not None:
        return found, []
    flats = outs if reused else [calls.results(state, out, args) for out, args in zip(outs, sets)]
    if any(type(t) is not torch.Tensor for flat in flats for t in flat):
        return failure(ReasonCode.WRONG_TYPE, "a steady-state call returned a non-tensor"), []
    width = len(flats[0]) if flats else 0
    if any(len(flat) != width for flat in flats):
        return failure(ReasonCode.WRONG_SHAPE, "steady-state calls returned different numbers of outputs"), []
    for flat in flats:
        refused = shadows.check(flat, "a steady-state output")
        if refused is not None:
            return refused, []
    with hooks.quiet():
        by_output = [
            fingerprints([flat[k] for flat in flats], int(h["projection_seed"])) for k in range(width)
        ]
    fps = [[by_output[k][i] for k in range(width)] for i in range(len(flats))]
    return {"ok": True, "per_call_ms": total_ms / len(sets), "fingerprints": fps}, []


def _warm_up(state: WorkerState, warmup: list[list[Any]]) -> bool:
    """Run the warm-up calls; whether their outputs shared storage (a static output buffer,
    CUDA-graph style: legitimate, :mod:`kernelproof.worker.checks.reuse`)."""
    seen: list[list[Any] | None] = []
    reused = False
    for args in warmup:
        flat = calls.results(state, calls.call(state, args), args)
        reused = reused or bool(reuse.shared_with(flat, seen))
        seen.append(flat)
    return reused


def _back_to_back(state: WorkerState, sets: list[list[Any]], copy: bool = False) -> tuple[list[Any], float]:
    """(every call's output, milliseconds for the calls): CUDA events around the batch, or the
    host's clock on the CPU. The outputs are kept, so none is freed (and none of their memory
    reused) before the fingerprints. ``copy``: the solution returns one buffer from every call (seen
    in the warm-up), so each call's results are copied right after it, on its stream, before the
    next call overwrites them (each item is then that call's copied results); the copies are inside
    the batch's time, as a caller that keeps an output pays for them."""

    def run(args: list[Any]) -> Any:
        out = calls.call(state, args)
        if not copy:
            return out
        flat = calls.results(state, out, args)
        refused = shadows.check(flat, "a steady-state output")  # before its own methods make the copy
        if refused is not None:
            raise Refused(refused)
        return [torch.Tensor.clone(t) if type(t) is torch.Tensor else t for t in flat]

    if state.device.type == "cuda":
        torch.cuda.synchronize(state.device)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        outs = [run(args) for args in sets]
        end.record()
        torch.cuda.synchronize(state.device)
        return outs, start.elapsed_time(end)
    t0 = time.perf_counter()
    outs = [run(args) for args in sets]
    return outs, (time.perf_counter() - t0) * 1e3


def input_spec(h: dict[str, Any], tensors: list[torch.Tensor]):
    """The parent's recipe for a call's inputs (VariantContext.input_spec), decoded."""
    slots = [InputSlot(**s) for s in h["slots"]]
    fixed = {int(k): tensors[v] for k, v in h.get("fixed", {}).items()}
    scalars = {int(k): v for k, v in h.get("scalars", {}).items()}
    return slots, fixed, scalars
