"""Inputs come back from a call bit for bit as they went in (I3; exploit class A8).

An input used as scratch space, or overwritten with the output, changes what the next reader
sees; the harness keeps a copy of each input and compares every byte after the call (NaN payloads
and signed zeros included). Arguments the task updates in place are compared as results instead.
"""

from __future__ import annotations

from typing import Any

import torch

from kernelproof.inputs import same_bits
from kernelproof.verdict import ReasonCode
from kernelproof.wire.replies import failure


def check(
    args: list[Any], originals: list[tuple[int, torch.Tensor]], inplace: tuple[int, ...]
) -> dict[str, Any] | None:
    """A failed reply for the first input that differs from its saved original; else None."""
    for i, orig in originals:
        if i in inplace:
            continue
        if not same_bits(args[i].to(orig.device), orig):
            return failure(ReasonCode.INPUT_MUTATED, f"forward changed input {i} (inputs are read-only)")
    return None
