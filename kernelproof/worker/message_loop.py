"""The worker: the only process where candidate code runs (I1).

It receives inputs and weights, runs the program, and returns outputs, times and observations.
It never holds a reference output (I2) and decides nothing: every answer it gives is data the
parent re-checks. Started as ``python -m kernelproof.worker --fd N --role candidate|baseline``.

This module is the message loop: one request at a time, each dispatched to the module that does
that job, each answered with one reply, in which a failure carries a
:class:`~kernelproof.verdict.ReasonCode` (:mod:`kernelproof.wire.replies`). Every reply echoes
its request's op and nonce: the parent accepts only the reply to the request in flight, in the
schema of its kind (:mod:`kernelproof.wire.schemas`). The nonce keeps frames in step; it is not
authentication, since the candidate shares this process and can read it.

- ``prebuilt``, ``load``: :mod:`~kernelproof.worker.loading` (the guards are armed there)
- ``run``: one correctness case, :mod:`~kernelproof.worker.case_runs`
- ``time``, ``steady``: :mod:`~kernelproof.worker.timed_calls` (a ``time`` batch is an exchange: the
  worker says ``closed`` and ``fingerprint`` after each call and takes ``project``, then ``next`` or
  ``end``, through ``state.channel``; kernelproof.measure.batch is the parent's side)
- ``fetch``: a timed call's full output, :mod:`~kernelproof.worker.fetch`
- ``profile``: launch accounting, :mod:`~kernelproof.worker.profiling`
- ``rest``: a baseline worker between evaluations lets go of its last batch (:func:`rest`)
- ``bye``: the worker exits (a wrapper such as compute-sanitizer then prints its report)
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import time
import traceback
import types
from collections.abc import Callable, Mapping
from typing import Any

import torch

from kernelproof.verdict import ReasonCode
from kernelproof.wire import handoff, protocol
from kernelproof.wire.replies import failure
from kernelproof.worker import case_runs, checks, fetch, loading, profiling, surface, timed_calls
from kernelproof.worker.state import WorkerState

Handler = Callable[
    [WorkerState, dict[str, Any], list[torch.Tensor]], tuple[dict[str, Any], list[torch.Tensor]]
]
TIMED_OPS = ("time", "steady")  # requests whose replaced harness code is timing_tamper


def handlers() -> dict[str, Handler]:
    """Each request's handler, by op."""
    return {
        "prebuilt": loading.prebuilt,
        "load": loading.load,
        "run": case_runs.run,
        "time": timed_calls.time_calls,
        "steady": timed_calls.steady,
        "fetch": fetch.fetch,
        "profile": profiling.profile,
        "rest": rest,
    }


def rest(state: WorkerState, h: dict[str, Any], tensors: list[torch.Tensor]):
    """A baseline worker whose lease ended lets go of its last batch and hands its allocator's
    cached blocks back to the device: idle, it holds its weights and its program only.

    Why: a baseline worker outlives the evaluation that leased it (kernelproof/executors/local.py),
    and it kept its last timed batch (the buffers B1 keeps alive, the outputs a fetch reads) and
    the blocks its allocator cached: memory no evaluation's reservation counts once the lease ends.
    On an H100, with KernelBench level1/47_Sum_reduction evaluations in flight (8 GiB an input),
    idle baseline processes held 17 and 25 GiB that way and another evaluation ran out of memory.
    Only between evaluations, never between an evaluation's rounds: an empty cache there would make
    each of the baseline's timed calls allocate its outputs from the driver inside its window. The
    next evaluation's warm-up batch refills it, as it does for a new baseline worker. A
    candidate's worker ends with its evaluation and is never asked."""
    if state.role != "baseline":
        return failure(ReasonCode.INTERNAL_ERROR, "rest is for a baseline worker"), []
    state.let_go()
    return {"ok": True}, []


def serve(sock: socket.socket, state: WorkerState) -> None:
    """Answer requests until ``bye`` or a closed connection."""
    protocol.send(sock, {"op": "hello", **environment(state)})
    # Bound before any solution runs: rebinding a module's name later changes nothing here. A read-only
    # view, since a torch helper that walks frames hands the solution this frame's locals (#45).
    table = types.MappingProxyType(handlers())

    # The request in flight, whose op and nonce every message back carries: the parent matches a
    # reply to its request. Within a timed batch each step answers the parent's latest message
    # (time, project, next), and the batch's reply answers its ``end``.
    in_flight: dict[str, Any] = {}

    def channel(said: dict[str, Any]) -> dict[str, Any]:
        protocol.send(sock, {**said, **in_flight})
        header, _ = protocol.recv(sock)
        in_flight.update(op=header.get("op"), nonce=header.get("nonce"))
        return header

    def ask(message: dict[str, Any]) -> dict[str, Any]:
        """A message the worker starts inside the request in flight (a build request): the parent
        answers it and then still waits for that request's reply, so ``in_flight`` stays."""
        protocol.send(sock, message)
        header, _ = protocol.recv(sock)
        return header

    state.channel = channel
    state.ask = ask
    while True:
        try:
            header, tensors = protocol.recv(sock)
        except protocol.ProtocolError:
            return
        op = header.get("op")
        in_flight.clear()
        in_flight.update(op=op, nonce=header.get("nonce"))
        if op == "bye":
            protocol.send(sock, {"ok": True, **in_flight})
            return
        reply, out = answer(table, state, op, header, tensors)
        protocol.send(sock, {**reply, **in_flight}, out)


def answer(
    table: Mapping[str, Handler],
    state: WorkerState,
    op: Any,
    header: dict[str, Any],
    tensors: list[torch.Tensor],
):
    """One request's reply: refused if the solution left the harness hooked since the last one, and
    replaced by a failure if it replaced harness code during this one (checked here, in the loop
    that is already running, so a replaced handler cannot skip it)."""
    handler = table.get(op) if isinstance(op, str) else None
    if handler is None:
        return failure(ReasonCode.INTERNAL_ERROR, f"unknown op {op!r}"), []
    found = checks.harness_intact(state, full=op not in TIMED_OPS) if state.armed else None
    if found is not None:
        return found, []
    reply, out = handler(state, header, tensors)
    replaced = state.integrity()
    if replaced:
        code = ReasonCode.TIMING_TAMPER if op in TIMED_OPS else ReasonCode.FORBIDDEN_CONSTRUCT
        return failure(code, "the solution replaced harness code: " + ", ".join(replaced)), []
    return reply, out


def environment(state: WorkerState) -> dict[str, Any]:
    """What the hello reports: versions, the device, and whether large outputs can be handed over."""
    env: dict[str, Any] = {
        "pid": os.getpid(),
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "cuda_available": torch.cuda.is_available(),
    }
    try:
        import triton

        env["triton"] = triton.__version__
    except Exception:  # noqa: BLE001
        env["triton"] = None
    if torch.cuda.is_available():
        env["cuda"] = torch.version.cuda
        env["gpu"] = torch.cuda.get_device_name(0)
        env["profiler_warm_s"] = state.profiler_warm_s  # seconds of the start-up session, or None
        env["handoff"] = handoff.available()  # large outputs can come back on the device
    return env


def warm_profiler() -> float | None:
    """One empty profiler session with CUDA activity, before the worker says hello.

    The first session in a process initialises CUPTI and Kineto. In an H200 profile the twelve
    timing requests of one evaluation took 6.8 s, while a round's batch costs tens of milliseconds
    (other tasks' overhead records): so most of it was in the two warm-up batches, and the
    candidate's was its fresh process's first profiler session. A worker starts while an earlier
    evaluation sets up and checks correctness, and timing waits until it has said hello, so this
    cost leaves the critical path and every timed window. The hello reports what it took
    (``profiler_warm_s``).
    """
    t0 = time.perf_counter()
    try:
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]):
            torch.cuda._sleep(1000)
            torch.cuda.synchronize()
    except Exception:  # noqa: BLE001 - the first timed batch then pays for it, as before
        return None
    return round(time.perf_counter() - t0, 3)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="kernelproof.worker")
    ap.add_argument("--fd", type=int, required=True)
    ap.add_argument("--role", choices=["candidate", "baseline"], required=True)
    ap.add_argument("--private-dir", default="")
    ap.add_argument("--deny-read", action="append", default=[])
    ap.add_argument("--no-profiler-warmup", action="store_true", help="under a tool that owns CUPTI")
    ns = ap.parse_args(argv)
    sock = socket.socket(fileno=ns.fd)
    os.set_inheritable(ns.fd, False)
    warm_s = None
    if torch.cuda.is_available():
        torch.cuda.init()
        if not ns.no_profiler_warmup:
            warm_s = warm_profiler()
    try:
        import triton  # noqa: F401 - imported before the hook is armed, as any library
    except Exception:  # noqa: BLE001
        pass
    surface.harness_references()  # parses the harness's source now, not when a candidate loads
    state = WorkerState(ns.role, ns.private_dir, tuple(ns.deny_read), warm_s)
    try:
        serve(sock, state)
    except protocol.ProtocolError:
        return 0
    except BaseException:  # noqa: BLE001 - a harness bug: say where, the parent reports internal error
        traceback.print_exc()
        return protocol.EXIT_HARNESS
    return 0
