"""Loading the program a worker runs, and arming the candidate's guards before its first line runs.

``prebuilt``: the parent copied the solution's build into the private directory, so load_inline
and load_cuda find it there instead of compiling. ``load``: numeric flags pinned for the task's
precision contract, the clock for the device, then the candidate's ModelNew (or the task's Model
in a baseline worker) built with the reference's init arguments and given its weights.

A candidate's worker arms its guards once, before the solution is imported (I1): the audit hook,
the identity snapshot of the harness's functions, and the snapshot of what the harness's torch
calls rely on (:mod:`kernelproof.worker.checks.hooks`).
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

import torch

from kernelproof import numeric_flags
from kernelproof.inputs import dtype_from_name
from kernelproof.sandbox import guards
from kernelproof.verdict import ReasonCode
from kernelproof.wire.replies import failure
from kernelproof.worker import calls, checks, interpreter, interpreter_bf16, launches, program, surface
from kernelproof.worker.checks import hooks, threads
from kernelproof.worker.clock import CpuClock, CudaClock
from kernelproof.worker.state import WorkerState

# Bound once: torch rebinds torch.manual_seed when torch._dynamo is first imported (a solution
# that uses torch.compile), and every name the harness reads from a module is identity-checked.
_manual_seed = torch.manual_seed


def prebuilt(state: WorkerState, h: dict[str, Any], tensors: list[torch.Tensor]):
    """Before the first load: route load_inline and load_cuda to the build the parent copied here.
    Sent by the parent only, before any candidate code ran."""
    if state.armed:
        return failure(ReasonCode.INTERNAL_ERROR, "prebuilt after the solution was loaded"), []
    from kernelproof.build import install_load_inline

    arch = str(h.get("arch") or "")
    if arch:
        os.environ["TORCH_CUDA_ARCH_LIST"] = arch  # native cubins are found by a hash that includes it
    from kernelproof.build import inline

    install_load_inline()
    if state.ask is not None:
        inline.set_requester(_requester(state.ask))
    state.prebuilt = True
    return {"ok": True}, []


def _threads(n: Any) -> None:
    """The thread counts the parent set for this worker's cores (kernelproof.host.cpus): torch's
    own, and the variables any library or process started from here reads at its start."""
    if type(n) is not int or n < 1:
        return
    torch.set_num_threads(n)
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[name] = str(n)  # this process's own environment: what its children inherit


def _requester(ask: Any):
    """Send one build request to the parent and wait for its answer (kernelproof.build.runtime_request)."""
    from kernelproof.build import runtime_request

    def request(call: str, args: dict[str, Any]) -> dict[str, Any]:
        return ask(runtime_request.message(args, call))

    return request


def load(state: WorkerState, h: dict[str, Any], tensors: list[torch.Tensor]):
    """Load the program for one shape variant; the reply says how the weights were given to it."""
    if state.candidate and h.get("let_go"):
        _let_go(state)
    _configure(state, h)
    _threads(h.get("threads"))
    init_args = [tensors[a["t"]] if "t" in a else a["v"] for a in h["init_args"]]
    n_attributes = len(h.get("attribute_names", ()))
    end = len(tensors) - n_attributes
    weights = tensors[h["weights_offset"] : end]
    attributes = tensors[end:]
    t0 = time.perf_counter()
    seed = int(h.get("init_seed", 0))
    _manual_seed(seed)  # the solution's import runs under it too (its module-level code)
    report: dict[str, Any] = {}
    if state.candidate:
        model, refused, report = _load_candidate(state, h, init_args, seed)
        if refused is not None:
            return refused, []
    else:
        model = program.load_reference(state.solution_path, init_args, h.get("source"), state.device, seed)
    # The candidate's load hooks and module methods run here: as solution code (its guards' label).
    state.switch(state.candidate)
    try:
        program.prepare(model, state.device, None if h.get("keep_dtypes") else state.dtype, h["mode"])
        how = program.copy_weights(model, h["weight_names"], weights)
        attributes_copied = program.copy_attributes(model, h.get("attribute_names", []), attributes)
    except Exception as exc:  # noqa: BLE001
        state.switch(False)
        return calls.call_failure(exc, "preparing ModelNew", state.solution_path), []
    state.switch(False)
    if state.candidate and how == "by_name":
        report["unmatched_state"] = program.unmatched_state(model, h["weight_names"])
    state.model = state.fn = model
    if h.get("compile_mode"):
        state.fn = torch.compile(model, mode=h["compile_mode"])
    load_s = time.perf_counter() - t0
    reply = {"ok": True, "load_s": load_s, "weights": how, "attributes": attributes_copied}
    return {**reply, "flags": numeric_flags.read(), **report}, []


def _let_go(state: WorkerState) -> None:
    """What a candidate's worker kept from its last requests goes before it loads for its timed
    rounds (the parent asks, for each timed shape; never between correctness cases, where run 2
    reuses the last case's buffers): the last program, the buffers B1 keeps
    alive, the last batch's results, and the blocks its allocator cached (back to the device).

    Why: kept, the cases' buffers sat beside the timed batch. On an H200, KernelBench
    level1/38_L1Norm_ (8.6 GB an input and an output) needed 189 GB for its timed rounds, about
    50 GB of it the candidate's cases, and its honest kernels ran out of memory alone. A timed
    batch's buffers may now take addresses a case's had: every timed call's output is checked
    (its fingerprint against the oracle's), so a result cached by address is a wrong result there,
    and from the first batch on a small batch's buffers are kept while the next is drawn (B1, as
    before; a large one goes first: kernelproof/worker/state.py, ``let_go_of_a_large_batch``). The
    parent's reservation for the timed rounds counts the worker's program, its batch and a kept
    one (kernelproof/evaluate/setup.py, ``timed_footprint_bytes``)."""
    state.let_go(program=True)


def _configure(state: WorkerState, h: dict[str, Any]) -> None:
    """The task's device, dtype and precision contract, and the clock for the device."""
    state.device = torch.device(h["device"])
    state.dtype = dtype_from_name(h["dtype"])
    state.precision = h["precision"]
    state.inplace = tuple(int(i) for i in h.get("inplace", ()))
    state.solution_path = h.get("path", "")
    # The cuDNN modes a solution chose (kernelproof.numeric_flags.NEUTRAL) stay its own across loads once its
    # code ran here; a baseline worker is given the candidate's benchmark mode by the parent.
    now = numeric_flags.read()
    kept = numeric_flags.neutral_settings(state.precision, now) if state.armed else {}
    numeric_flags.apply(state.precision, {**kept, **dict(h.get("neutral_flags") or {})})
    if state.device.type == "cuda":
        torch.cuda.set_device(state.device)
        torch.empty(1, device=state.device)  # create the context before the candidate runs
        state.clock = CudaClock(state.device)
    else:
        state.clock = CpuClock()


def _load_candidate(state: WorkerState, h: dict[str, Any], init_args: list[Any], seed: int):
    """(model, a failed reply or None, the build report) for the candidate's ModelNew."""
    if not state.armed:
        arm(state, tuple(h.get("deny_read", ())))
    threads_before = state.thread_state()
    state.switch(True)
    model, failed = program.load_candidate(state.solution_path, init_args, state.imported, state.device, seed)
    state.switch(False)
    report = {"build": _build_report()} if state.prebuilt else {}
    refused = checks.harness_intact(state, full=True) or threads.check(
        state, threads_before, "importing the solution"
    )
    if refused is None and failed is not None:
        refused = failure(failed.code, failed.message, failed.detail, failed.memory_excluded, **report)
    return model, refused, report


def arm(state: WorkerState, deny_read: tuple[str, ...]) -> None:
    """Arm the candidate's guards: armed before the first line of candidate code runs (I1), never removed.

    On the CPU the solution's launch paths are wrapped first (launch accounting without a device:
    :mod:`kernelproof.worker.launches`), so that the identity snapshot holds the wrappers.
    """
    if state.device.type == "cpu":
        state.launches = launches.install()
        interpreter.install_autotune()
        interpreter_bf16.install()  # bf16 computed as a GPU does, not on raw 16-bit patterns
    deny = state.deny_read + deny_read
    state.switch = guards.install(guards.GuardConfig(state.solution_path, state.private_dir, deny))
    state.hooked = hooks.watch(imported=tuple(surface.harness_imports()))
    # After install and watch: the snapshot holds the wrappers both put in place.
    state.integrity = guards.integrity_check(
        surface.harness_functions()
        + guards.thread_start_targets()
        + guards.fork_exec_targets()
        + hooks.guarded()
        + surface.harness_references()
        + launches.entry_points()
    )
    state.armed = True


def _build_report() -> dict[str, Any]:
    """What the solution's import built or loaded here (the worker's own account, shown only)."""
    from kernelproof.build import inline

    native = sys.modules.get("kernelproof.native")
    compiled = sum(not r.get("cached") for r in native.records()) if native is not None else 0
    return {
        "inline": [str(r.get("strategy", "")) for r in inline.records()],
        "native_compiled": compiled,
    }
