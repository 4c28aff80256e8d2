"""Numeric flags pinned by the precision contract, identically for reference, baselines and candidate (I7).

PyTorch's defaults are not neutral: cuDNN convolutions run TF32 by default while fp32 matmuls do
not, so an "fp32" comparison silently mixes precisions unless the flags are set. Library code
never writes these flags (house rule 9); only :func:`pinned` (used by the worker bootstrap and the
parent's reference runs) does, and :func:`read` reports them for the verdict and the re-check.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch

from kernelproof.torch_globals import LOCK


def target(precision: str) -> dict[str, Any]:
    """The flag values a precision contract asks for."""
    tf32 = precision == "tf32"
    return {
        "matmul.allow_tf32": tf32,
        "cudnn.allow_tf32": tf32,
        "float32_matmul_precision": "high" if tf32 else "highest",
        "cudnn.benchmark": False,
        "cudnn.deterministic": False,
    }


def apply(precision: str) -> None:
    """Set the flags for a contract (worker bootstrap and the parent's reference runs only)."""
    want = target(precision)
    torch.backends.cuda.matmul.allow_tf32 = want["matmul.allow_tf32"]
    torch.backends.cudnn.allow_tf32 = want["cudnn.allow_tf32"]
    torch.set_float32_matmul_precision(want["float32_matmul_precision"])
    torch.backends.cudnn.benchmark = want["cudnn.benchmark"]
    torch.backends.cudnn.deterministic = want["cudnn.deterministic"]


def read() -> dict[str, Any]:
    """Read every flag through torch's current API; a failure to read is itself reported."""
    out: dict[str, Any] = {
        "matmul.allow_tf32": bool(torch.backends.cuda.matmul.allow_tf32),
        "cudnn.allow_tf32": bool(torch.backends.cudnn.allow_tf32),
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        "cudnn.benchmark": bool(torch.backends.cudnn.benchmark),
        "cudnn.deterministic": bool(torch.backends.cudnn.deterministic),
    }
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


@contextlib.contextmanager
def pinned(precision: str) -> Iterator[dict[str, Any]]:
    """Pin the flags for a block and restore the previous values afterwards.

    The flags are the process's: the block holds torch_globals.LOCK, so another thread's pin
    neither changes them under it nor restores over it."""
    with LOCK:
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
