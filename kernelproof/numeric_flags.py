"""Numeric flags pinned by the precision contract, identically for reference, baselines and candidate (I7).

PyTorch's defaults are not neutral: cuDNN convolutions run TF32 by default while fp32 matmuls do
not, so an "fp32" comparison silently mixes precisions unless the flags are set. Library code
never writes these flags (docs/architecture.md, house rule 9); only :func:`pinned` (used by the worker bootstrap and the
parent's reference runs) does, and :func:`read` reports them for the verdict and the re-check.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch

from kernelproof.torch_globals import held

# Settings that choose among algorithms at the same precision: cuDNN's benchmark mode picks the
# fastest of its kernels for the shapes seen, deterministic restricts it to reproducible ones. A
# solution may set them in its own process (a flag, not flags_changed); when it sets benchmark
# mode, the baselines run with the same setting (kernelproof.evaluate.timing).
NEUTRAL = ("cudnn.benchmark", "cudnn.deterministic")


def target(precision: str) -> dict[str, Any]:
    """The flag values a precision contract asks for."""
    tf32 = precision == "tf32"
    return {
        "matmul.allow_tf32": tf32,
        "cudnn.allow_tf32": tf32,
        "float32_matmul_precision": "high" if tf32 else "highest",
        "cudnn.benchmark": False,
        "cudnn.deterministic": False,
        # torch's defaults; a solution switching them changes the precision of half GEMMs' reductions
        "matmul.allow_fp16_reduced_precision_reduction": True,
        "matmul.allow_bf16_reduced_precision_reduction": True,
    }


def apply(precision: str, neutral: dict[str, Any] | None = None) -> None:
    """Set the flags for a contract (worker bootstrap and the parent's reference runs only);
    `neutral` overrides the :data:`NEUTRAL` settings (a baseline following the candidate's)."""
    want = {**target(precision), **{k: bool(v) for k, v in (neutral or {}).items() if k in NEUTRAL}}
    torch.backends.cuda.matmul.allow_tf32 = want["matmul.allow_tf32"]
    torch.backends.cudnn.allow_tf32 = want["cudnn.allow_tf32"]
    torch.set_float32_matmul_precision(want["float32_matmul_precision"])
    torch.backends.cudnn.benchmark = want["cudnn.benchmark"]
    torch.backends.cudnn.deterministic = want["cudnn.deterministic"]
    _set_reductions(want)


def _set_reductions(values: dict[str, Any]) -> None:
    matmul = torch.backends.cuda.matmul
    for key in ("allow_fp16_reduced_precision_reduction", "allow_bf16_reduced_precision_reduction"):
        if hasattr(matmul, key) and f"matmul.{key}" in values:
            setattr(matmul, key, values[f"matmul.{key}"])


def read() -> dict[str, Any]:
    """Read every flag through torch's current API; a failure to read is itself reported."""
    out: dict[str, Any] = {
        "matmul.allow_tf32": bool(torch.backends.cuda.matmul.allow_tf32),
        "cudnn.allow_tf32": bool(torch.backends.cudnn.allow_tf32),
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        "cudnn.benchmark": bool(torch.backends.cudnn.benchmark),
        "cudnn.deterministic": bool(torch.backends.cudnn.deterministic),
    }
    matmul = torch.backends.cuda.matmul
    for key in ("allow_fp16_reduced_precision_reduction", "allow_bf16_reduced_precision_reduction"):
        if hasattr(matmul, key):
            out[f"matmul.{key}"] = bool(getattr(matmul, key))
    # Newer torch exposes fp32_precision per backend; record it where it exists.
    for label, obj in (
        ("fp32_precision", torch.backends),
        ("matmul.fp32_precision", getattr(torch.backends.cuda, "matmul", None)),
        ("cudnn.fp32_precision", torch.backends.cudnn),
    ):
        value = getattr(obj, "fp32_precision", None) if obj is not None else None
        if value is not None:
            out[label] = str(value)
    return out


def differences(expected: dict[str, Any], actual: dict[str, Any]) -> list[str]:
    """Names of flags whose values differ (flags absent on one side are ignored)."""
    return [k for k, v in expected.items() if k in actual and actual[k] != v]


def precision_differences(expected: dict[str, Any], actual: dict[str, Any]) -> list[str]:
    """The differences that change numerics: every one but the :data:`NEUTRAL` settings."""
    return [k for k in differences(expected, actual) if k not in NEUTRAL]


def neutral_settings(precision: str, actual: dict[str, Any]) -> dict[str, bool]:
    """The :data:`NEUTRAL` settings in `actual` that differ from the contract's target."""
    want = target(precision)
    return {k: bool(actual[k]) for k in NEUTRAL if k in actual and bool(actual[k]) != want[k]}


def neutral_flag(settings: dict[str, bool]) -> str:
    """The verdict's flag for the neutral settings a solution made ("" for none)."""
    if not settings:
        return ""
    said = ", ".join(f"torch.backends.{k}={v}" for k, v in sorted(settings.items()))
    return (
        f"numeric_neutral_setting: the solution sets {said} (chooses among cuDNN's algorithms at the "
        "same precision; allowed, not flags_changed)"
    )


def baseline_setting(settings: dict[str, bool]) -> dict[str, bool]:
    """What the baselines are given of the candidate's neutral settings: its cuDNN benchmark mode
    (deterministic only slows the candidate; the baselines keep the contract's)."""
    return {k: v for k, v in settings.items() if k == "cudnn.benchmark"}


@contextlib.contextmanager
def pinned(precision: str) -> Iterator[dict[str, Any]]:
    """Pin the flags for a block and restore the previous values afterwards.

    The flags are the process's: the block holds torch_globals.LOCK, so another thread's pin
    neither changes them under it nor restores over it."""
    with held():
        yield from _pinned(precision)


def _pinned(precision: str) -> Iterator[dict[str, Any]]:
    before = read()
    apply(precision)
    try:
        yield read()
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before["matmul.allow_tf32"]
        torch.backends.cudnn.allow_tf32 = before["cudnn.allow_tf32"]
        torch.set_float32_matmul_precision(before["float32_matmul_precision"])
        torch.backends.cudnn.benchmark = before["cudnn.benchmark"]
        torch.backends.cudnn.deterministic = before["cudnn.deterministic"]
        _set_reductions(before)
