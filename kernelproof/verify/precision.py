"""Lower precisions: which ones an error is compared against, and what a failed timed output was.

A kernel that computes below its task's contract (A9) is ``precision_downgrade`` naming the
precision, never a plain ``mismatch`` and never ``stale_output``. The precisions compared below
each contract are fp16, bf16 and, on CUDA only, TF32 (the CPU has no TF32 matmul) and fp8 (e4m3,
on devices of compute capability 8.9 and later, which have fp8 arithmetic). An error is a lower
precision's only within ``DOWNGRADE_BAND`` (1/4x..4x) of that precision's own error on the same
case (:func:`classify_downgrade`).

In the timing step an output is checked by its fingerprint. When one fails, :func:`timed_output_reason`
asks whether the same call's output, recomputed here from that call's inputs in a lower precision,
explains it: with the call's full output (fetched from the worker) by the same band as correctness
(as for a hidden re-check's full output, :func:`rechecked_reason`);
with the fingerprint alone, only when the candidate's projection matches the lower precision's
within the allowance that failed for the contract's. A kernel that passed correctness and then
computes in a lower precision changed its path (a warm-up or autotuning that picks a faster, less
precise one): the message says so. Anything else is ``stale_output``.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import Any

import torch

from kernelproof.inputs import fingerprint
from kernelproof.verdict import Reason, ReasonCode
from kernelproof.verify.case_plan import CONTRACT_DTYPE, VariantContext, run_model, to_device
from kernelproof.verify.oracle import FactoryDtype, convert_attributes, oracle_scope
from kernelproof.verify.oracle_compare import DOWNGRADE_BAND, rel_norm_error

# Below each contract; of those within the band, the one whose error is nearest names it.
LOWER_PRECISIONS = {
    "fp32": ("tf32", "fp16", "bf16", "fp8"),
    "tf32": ("fp16", "bf16", "fp8"),
    "bf16": ("fp8",),
    "fp16": ("fp8",),
}
FP8_DTYPE_NAME = "float8_e4m3fn"  # the fp8 format of inference GEMMs (e4m3: 3 mantissa bits, max 448)
FP8_MIN_CAPABILITY = (8, 9)  # Ada and Hopper: the first CUDA devices with fp8 tensor cores
PATH_CHANGE = (
    "its correctness calls met the {contract} contract, so it changed its computation path between "
    "correctness and timing (a warm-up or autotuning that picks a faster, less precise path)"
)


@dataclass(frozen=True)
class Label:
    """What a too-large error is called: the error of a lower precision, or a plain mismatch."""

    code: str  # precision_downgrade | mismatch
    message: str  # the comparison's message, with the classification's evidence
    notes: tuple[str, ...] = ()  # lower precisions whose reference could not run
    precision: str = ""  # the lower precision named (precision_downgrade only)


def compared(contract: str, device: torch.device) -> tuple[str, ...]:
    """The lower precisions this device can compute, below `contract` (docs/verdict.md lists them)."""
    return tuple(p for p in LOWER_PRECISIONS.get(contract, ()) if available(p, device))


def available(precision: str, device: torch.device) -> bool:
    """TF32 needs CUDA; fp8 needs CUDA of capability 8.9 or later and a torch that has the dtype."""
    if precision == "tf32":
        return device.type == "cuda"
    if precision == "fp8":
        if device.type != "cuda" or not hasattr(torch, FP8_DTYPE_NAME):
            return False
        return torch.cuda.get_device_capability(device) >= FP8_MIN_CAPABILITY
    return True


def lower_precision_outputs(
    ctx: VariantContext, args: list[Any], precision: str
) -> list[torch.Tensor] | None:
    """The reference computed in a lower precision, in the contract dtype (None: not on this device).

    fp8 is emulated as an fp8 GEMM computes: every floating weight and input rounded to e4m3 with a
    per-tensor scale (amax / 448), the arithmetic in the contract precision."""
    if not available(precision, ctx.device):
        return None
    if precision == "tf32":
        return run_model(ctx.reference, to_device(args, ctx.device), "tf32", ctx.inplace)
    if precision == "fp8":
        low = copy.deepcopy(ctx.reference)
        with torch.no_grad():
            for p in list(low.parameters()) + list(low.buffers()):
                if p.is_floating_point():
                    p.data = _fp8_rounded(p.data)
        moved = [_fp8_rounded(a) if _is_float(a) else a for a in to_device(args, ctx.device)]
        return run_model(low, moved, ctx.precision, ctx.inplace)
    dt = CONTRACT_DTYPE[precision]
    low = copy.deepcopy(ctx.reference).to(dt)
    convert_attributes(low, dt, ctx.device)
    out = run_model(low, to_device(args, ctx.device, dt), precision, ctx.inplace, FactoryDtype(dt))
    return [t.to(ctx.dtype) if t.is_floating_point() else t for t in out]


def _is_float(a: Any) -> bool:
    return isinstance(a, torch.Tensor) and a.is_floating_point()


def _fp8_rounded(t: torch.Tensor) -> torch.Tensor:
    fp8 = getattr(torch, FP8_DTYPE_NAME)
    amax = float(t.detach().abs().max()) if t.numel() else 0.0
    scale = amax / torch.finfo(fp8).max if amax > 0 and math.isfinite(amax) else 1.0
    return ((t / scale).to(fp8).to(t.dtype) * scale).to(t.dtype)


def classify_downgrade(ctx, args, oracle, err: float, message: str, output: int = 0) -> Label:
    """Is a too-large error the error of a lower precision (A9)? Only when it lies within
    ``DOWNGRADE_BAND`` of that precision's reference error, computed on the same case: then
    ``precision_downgrade`` naming it (the nearest, when two are within the band). Otherwise a ``mismatch`` that names the nearest precision
    and how far off it is, so that an error 80 times smaller than bf16's is never called bf16.
    A lower precision whose reference overflows (fp16's range) explains nothing and is noted."""
    nearest = None
    notes = []
    for low in compared(ctx.precision, ctx.device):
        try:
            outs = lower_precision_outputs(ctx, args, low)
        except torch.OutOfMemoryError:
            raise
        except Exception as exc:  # noqa: BLE001 - a lower-precision reference that does not run explains nothing
            notes.append(
                f"precision_unclassified: the {low} reference could not run ({type(exc).__name__}); "
                f"errors are not classified against {low}"
            )
            continue
        if not outs or output >= len(outs):
            continue
        low_err = rel_norm_error(outs[output].to(torch.float64), oracle)
        if not math.isfinite(low_err):
            notes.append(
                f"precision_unclassified: the {low} reference's output is not finite (out of {low}'s range); "
                f"errors are not classified against {low}"
            )
            continue
        if not low_err > 0:
            continue
        ratio = err / low_err
        if ratio > 0 and (nearest is None or abs(math.log(ratio)) < abs(math.log(nearest[1]))):
            nearest = (low, ratio, low_err)
    if nearest is not None and 1 / DOWNGRADE_BAND <= nearest[1] <= DOWNGRADE_BAND:
        low, ratio, low_err = nearest
        return Label(
            "precision_downgrade",
            f"{message}. The error matches {low} arithmetic ({low} reference error {low_err:.3g}, "
            f"{ratio:.2g}x), below the task's {ctx.precision} contract",
            tuple(notes),
            low,
        )
    if nearest is not None:
        low, ratio, low_err = nearest
        message += (
            f" (no lower precision explains it: the nearest, {low}, has reference error {low_err:.3g}, "
            f"{ratio:.2g}x this error)"
        )
    return Label("mismatch", message, tuple(notes))


@dataclass(frozen=True)
class FailedFingerprint:
    """A timed call whose output's fingerprint did not match the reference's on its inputs."""

    call: int  # index of the call in its batch
    output: int  # index of the output that failed
    got: tuple[float, float]  # the worker's fingerprint of it: (projection, norm)
    projection_seed: int
    allowed: float  # the projection's allowance under the contract
    stale: Reason  # the verdict when nothing explains it


def timed_output_reason(
    ctx: VariantContext, args: list[Any], failed: FailedFingerprint, full: torch.Tensor | None
) -> Reason:
    """``precision_downgrade`` when the call's output is a lower precision's, else the stale reason.

    `args` are the call's inputs (recomputed here from its seed); `full` is the call's output
    fetched from the worker, None when it no longer exists (a reused output buffer) or could not
    be fetched: then only the fingerprint is weighed."""
    oracle_args = [a.to(torch.float64) if _is_float(a) else a for a in to_device(args, ctx.device)]
    try:
        oracle = run_model(ctx.oracle, oracle_args, "fp32", ctx.inplace, oracle_scope())[failed.output]
    except torch.OutOfMemoryError:
        raise
    except Exception:  # noqa: BLE001 - no float64 twin: nothing to weigh the error against
        return failed.stale
    if not oracle.is_floating_point():
        return failed.stale
    contract = ctx.precision
    if full is not None:
        err = rel_norm_error(full.to(oracle.device, torch.float64), oracle)
        if not math.isfinite(err):
            return failed.stale
        label = classify_downgrade(ctx, args, oracle, err, _head(failed), failed.output)
        if label.code != "precision_downgrade":
            return failed.stale
        return Reason(
            ReasonCode.PRECISION_DOWNGRADE, f"{label.message}; {PATH_CHANGE.format(contract=contract)}"
        )
    for low in compared(contract, ctx.device):
        try:
            outs = lower_precision_outputs(ctx, args, low)
        except torch.OutOfMemoryError:
            raise
        except Exception:  # noqa: BLE001 - explains nothing
            continue
        if not outs or failed.output >= len(outs):
            continue
        want = fingerprint(outs[failed.output], failed.projection_seed)
        off = max(abs(failed.got[0] - want[0]), abs(failed.got[1] - want[1]))
        if off <= failed.allowed:
            low_err = rel_norm_error(outs[failed.output].to(torch.float64), oracle)
            return Reason(
                ReasonCode.PRECISION_DOWNGRADE,
                f"{_head(failed)}; it matches the same call's output computed in {low} (fingerprints differ "
                f"by {off:.3g}, allowed {failed.allowed:.3g}; {low} reference error {low_err:.3g}), below the "
                f"task's {contract} contract; {PATH_CHANGE.format(contract=contract)}",
            )
    return failed.stale


def rechecked_reason(ctx: VariantContext, args: list[Any], oracle: torch.Tensor, cmp, output: int) -> Reason:
    """A hidden re-check's full output outside the tolerance (`cmp`, the comparison's result):
    ``precision_downgrade`` where a lower precision explains its error, as in correctness; else
    ``stale_output``."""
    message = f"a re-checked timed call failed: {cmp.message}"
    if cmp.code == "mismatch":
        label = classify_downgrade(ctx, args, oracle, cmp.rel_norm_err, message, output)
        if label.code == "precision_downgrade":
            return Reason(
                ReasonCode.PRECISION_DOWNGRADE,
                f"{label.message}; {PATH_CHANGE.format(contract=ctx.precision)}",
            )
    return Reason(ReasonCode.STALE_OUTPUT, message)


def _head(failed: FailedFingerprint) -> str:
    return f"output {failed.output} of timed call {failed.call} does not match the reference on its inputs"
