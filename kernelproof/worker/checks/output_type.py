"""An output is a plain, materialised tensor on the task's device (I6; exploit class C3).

A lazy tensor subclass can do its work when the harness first reads it, after the timed window
has closed; a meta or storage-less tensor holds no values at all. So the type is checked exactly
(``type(t) is torch.Tensor``, not ``isinstance``), and so are the device, the layout and the storage.
"""

from __future__ import annotations

from typing import Any

import torch

from kernelproof.verdict import ReasonCode
from kernelproof.wire.replies import failure
from kernelproof.worker.checks.aliasing import storage_of, storage_ptr


def check(outputs: list[Any], device: torch.device) -> dict[str, Any] | None:
    """A failed reply for the first output that is not a materialised tensor on ``device``; else None."""
    for t in outputs:
        if type(t) is not torch.Tensor:
            return failure(
                ReasonCode.WRONG_TYPE, f"forward returned {type(t).__name__}, not exactly torch.Tensor"
            )
        if t.device != device:
            return failure(ReasonCode.WRONG_TYPE, f"output is on {t.device}, expected {device}")
        if t.layout != torch.strided or t.is_meta:
            return failure(ReasonCode.WRONG_TYPE, "output is not a materialised strided tensor")
        if t.numel() and storage_ptr(storage_of(t)) == 0:
            return failure(ReasonCode.WRONG_TYPE, "output has no storage")
    return None
