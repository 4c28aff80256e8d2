"""An output shares no memory with an input (I6; exploit classes A7, A8).

Returning the input, or a view of it, costs nothing and can hold the right values on a degenerate
case; writing the output into an input's storage avoids an allocation. Both read or destroy what
the harness owns. Arguments the task updates in place are exempt: returning them is the contract.
"""

from __future__ import annotations

from typing import Any

import torch

from kernelproof.verdict import ReasonCode
from kernelproof.worker.replies import failure

_storage = (
    torch.Tensor.untyped_storage
)  # through the class: never a method set on the object (checks.shadows)


def overlaps(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Do the storages of ``a`` and ``b`` share a byte?"""
    sa, sb = _storage(a), _storage(b)
    a0, b0 = sa.data_ptr(), sb.data_ptr()
    return a0 < b0 + sb.nbytes() and b0 < a0 + sa.nbytes()


def check(outputs: list[torch.Tensor], args: list[Any], inplace: tuple[int, ...]) -> dict[str, Any] | None:
    """A failed reply when an output shares memory with an input it may not; else None."""
    for t in outputs:
        for k, a in enumerate(args):
            if k in inplace:
                continue
            if isinstance(a, torch.Tensor) and a.numel() and t.numel() and overlaps(t, a):
                return failure(ReasonCode.OUTPUT_ALIASES_INPUT, "the output shares memory with an input")
    return None
