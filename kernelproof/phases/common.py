"""What the evaluation phases share: the worker source, the evaluation's running state, the load request."""

from __future__ import annotations

import platform
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch

from kernelproof.options import EvalOptions
from kernelproof.sandbox.gate import DeviceGate
from kernelproof.sandbox.process import WorkerProcess
from kernelproof.verdict import (
    CaseResult,
    Reason,
    ReasonCode,
)
from kernelproof.verify.cases import (
    VariantContext,
)
from kernelproof.verify.compare import (
    Tolerance,
)

if TYPE_CHECKING:
    from kernelproof.phases.build import PendingBuild


class WorkerSource:
    """Where an evaluation gets its workers (the local pool, or a test double)."""

    def candidate(self, device: str, timed: bool = True) -> WorkerProcess:
        """A fresh process, used once. `timed`: this evaluation will time against baseline workers."""
        raise NotImplementedError

    def baseline(self, key: tuple, device: str) -> WorkerProcess:  # persistent per key
        raise NotImplementedError

    def discard_baseline(self, key: tuple) -> None:
        raise NotImplementedError

    def gate(self, device: str) -> DeviceGate:
        """The device's gate: entered shared around untimed GPU work, exclusively around timing.
        A source whose evaluations never overlap on a device may hand out a fresh gate each time."""
        return DeviceGate()

    def settle(self, device: str) -> None:
        """Return once no worker of this source is starting on the device (before timing)."""

    def resume(self, device: str) -> None:
        """After timing: workers that :meth:`settle` paused may go on starting."""

    def build(
        self, solution_path: str, sha256: str, device: str, options: EvalOptions
    ) -> PendingBuild | None:
        """The solution's build (CUDA and native backends), submitted now or earlier; None: no build
        step here, and the worker's import builds the solution itself."""
        return None


@dataclass
class State:
    reasons: list[Reason] = field(default_factory=list)
    flags: list[str] = field(default_factory=list)
    cases: list[CaseResult] = field(default_factory=list)
    kb_ok: bool = True
    tol_by_variant: dict[str, Tolerance] = field(default_factory=dict)
    worker_build: dict[str, Any] | None = None  # the worker's account of its import: prebuilt or compiled


def load_program(
    worker: WorkerProcess,
    ctx: VariantContext,
    path: str,
    role: str,
    options: EvalOptions,
    extra: dict[str, Any],
):
    init_spec, init_tensors = encode_args(ctx.init_args)
    header = {
        "op": "load",
        "path": path,
        "device": "cuda:0" if ctx.device.type == "cuda" else "cpu",
        "dtype": str(ctx.dtype).replace("torch.", ""),
        "precision": ctx.precision,
        "mode": ctx.mode,
        "inplace": list(ctx.inplace),
        "init_args": init_spec,
        "init_seed": ctx.init_seed,
        "weight_names": ctx.weight_names,
        "weights_offset": len(init_tensors),
        **extra,
    }
    reply, _ = worker.request(header, init_tensors + ctx.weight_tensors, options.timeout_s)
    return reply


def encode_args(args: list[Any]) -> tuple[list[dict[str, Any]], list[torch.Tensor]]:
    spec, tensors = [], []
    for a in args:
        if isinstance(a, torch.Tensor):
            spec.append({"t": len(tensors)})
            tensors.append(a)
        else:
            spec.append({"v": a})
    return spec, tensors


def reason_from_reply(reply: dict[str, Any], case_id: str = "") -> Reason:
    try:
        code = ReasonCode(reply.get("code", "runtime_error"))
    except ValueError:
        code = ReasonCode.RUNTIME_ERROR
    prefix = f"case {case_id}: " if case_id else ""
    return Reason(code, prefix + str(reply.get("message", "")), str(reply.get("detail", "")))


def device_name(device: str) -> str:
    if device.startswith("cuda") and torch.cuda.is_available():
        return torch.cuda.get_device_name(torch.device(device))
    return platform.processor() or "cpu"
