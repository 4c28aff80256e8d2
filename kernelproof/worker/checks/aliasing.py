"""An output shares no memory with an input (I6; exploit classes A7, A8).

Returning the input, or a view of it, costs nothing and can hold the right values on a degenerate
case; writing the output into an input's storage avoids an allocation. Both read or destroy what
the harness owns. Arguments the task updates in place are exempt: returning them is the contract.
"""

from __future__ import annotations

from typing import Any

import torch

from kernelproof.verdict import ReasonCode
from kernelproof.wire.replies import failure

# Called through the classes, never a method set on the object (kernelproof.worker.checks.shadows):
# a storage's Python object is kept with it and takes attributes as a tensor does.
storage_of = torch.Tensor.untyped_storage
storage_ptr = torch.UntypedStorage.data_ptr
storage_bytes = torch.UntypedStorage.nbytes


def overlaps(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Do the storages of ``a`` and ``b`` share a byte?"""
    sa, sb = storage_of(a), storage_of(b)
    a0, b0 = storage_ptr(sa), storage_ptr(sb)
    return a0 < b0 + storage_bytes(sb) and b0 < a0 + storage_bytes(sa)


def check(outputs: list[torch.Tensor], args: list[Any], inplace: tuple[int, ...]) -> dict[str, Any] | None:
    """A failed reply when an output shares memory with an input it may not; else None."""
    for t in outputs:
        for k, a in enumerate(args):
            if k in inplace:
                continue
            if isinstance(a, torch.Tensor) and a.numel() and t.numel() and overlaps(t, a):
                return failure(ReasonCode.OUTPUT_ALIASES_INPUT, "the output shares memory with an input")
    return None
