"""The parent's requests to a worker that more than one step makes: load a program, send arguments."""

from __future__ import annotations

import os
import platform
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch

from kernelproof.host import cpus
from kernelproof.host.process import WorkerDied, WorkerProcess
from kernelproof.options import EvalOptions
from kernelproof.verify.case_plan import VariantContext


def load_program(
    worker: WorkerProcess,
    ctx: VariantContext,
    path: str,
    role: str,
    options: EvalOptions,
    extra: dict[str, Any],
    limit_s: float | None = None,
) -> dict[str, Any]:
    """Ask the worker to load a program for one shape variant: the candidate's ModelNew (`role`
    "candidate") or the task's Model (a baseline), with the reference's init arguments and weights."""
    header, tensors = load_request(ctx, path)
    limit = options.timeout_s if limit_s is None else limit_s
    # before any code of the program runs; a candidate's worker on cores of its own (cpus.py)
    if role == "candidate":
        worker.pin_candidate(options.cpu_threads)
    else:
        worker.pin(cpus.plan(options.cpu_threads).cores(role))
    header["threads"] = options.cpu_threads
    reply, _ = worker.request({**header, **extra}, tensors, limit)
    return reply


def load_request(ctx: VariantContext, path: str) -> tuple[dict[str, Any], list[torch.Tensor]]:
    """The ``load`` request for ``ctx``'s variant: its header and its tensors (the init arguments',
    then the reference's weights, then its plain tensor attributes)."""
    init_spec, init_tensors = encode_args(ctx.init_args)
    header = {
        "op": "load",
        "path": path,
        "device": "cuda:0" if ctx.device.type == "cuda" else "cpu",
        "dtype": str(ctx.dtype).replace("torch.", ""),
        "precision": ctx.precision,
        # a bf16 or fp16 task as written: parameters keep the dtypes their Model gives them
        "keep_dtypes": ctx.keep_dtypes,
        "mode": ctx.mode,
        "inplace": list(ctx.inplace),
        "init_args": init_spec,
        "init_seed": ctx.init_seed,
        "weight_names": ctx.weight_names,
        "weights_offset": len(init_tensors),
        "attribute_names": ctx.attribute_names,  # sent after the weights (worker/program.copy_attributes)
    }
    return header, init_tensors + ctx.weight_tensors + ctx.attribute_tensors


def load_candidate(
    worker: WorkerProcess,
    ctx: VariantContext,
    staged: str,
    task_path: str,
    options: EvalOptions,
    let_go: bool = False,
) -> dict[str, Any]:
    """The candidate's ModelNew for one variant; the task file is one the worker must never read.
    Bounded by the import limit (`--import-timeout`): an import that loops is not a case's.
    `let_go`: the worker first drops what its cases kept (for the timed rounds:
    kernelproof/worker/loading.py, ``_let_go``)."""
    limit = options.step_limit("import")
    extra: dict[str, Any] = {"deny_read": [os.path.realpath(task_path)]}
    if let_go:
        extra["let_go"] = True
    with named_timeout("importing the solution and constructing ModelNew", limit, "--import-timeout"):
        return load_program(worker, ctx, staged, "candidate", options, extra, limit)


@contextmanager
def named_timeout(what: str, limit_s: float, option: str) -> Iterator[None]:
    """A worker step's timeout, said as the phase it cut: which step, its limit, the option that sets it."""
    try:
        yield
    except WorkerDied as died:
        if died.code != "timeout":
            raise
        message = f"{what} did not finish within {limit_s:g} s ({option}); the worker was killed"
        raise WorkerDied("timeout", message, died.detail) from None


def encode_args(args: list[Any]) -> tuple[list[dict[str, Any]], list[torch.Tensor]]:
    """Arguments as the wire carries them: tensors by index into the frame, everything else by value."""
    spec, tensors = [], []
    for a in args:
        if isinstance(a, torch.Tensor):
            spec.append({"t": len(tensors)})
            tensors.append(a)
        else:
            spec.append({"v": a})
    return spec, tensors


def device_name(device: str) -> str:
    """The device's marketing name (a verdict's device class; ceilings are looked up by it)."""
    if device.startswith("cuda") and torch.cuda.is_available():
        return torch.cuda.get_device_name(torch.device(device))
    return platform.processor() or "cpu"
