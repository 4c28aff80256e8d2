"""A case's second run gets its inputs at the addresses the previous case's first run used (B1).

Fresh storage everywhere would let a cache keyed on input addresses (data_ptr) never hit, and so
never be seen. The second run of each case instead gets its values at the very addresses the
previous case's first run used: a solution that serves a remembered output for a known address
returns the previous case's answer and fails the comparison. A correct solution cannot tell, as
a real caller reuses buffers too.
"""

from __future__ import annotations

from typing import Any

import torch

# The previous case's inputs were the solution's to hold, and to set attributes on: their methods
# are called through the class, never a method of the object's own (kernelproof.worker.checks.shadows).
_copy = torch.Tensor.copy_
_stride = torch.Tensor.stride
_is_contiguous = torch.Tensor.is_contiguous


def earlier(buffers: list[Any], args: list[Any]) -> list[Any]:
    """``args``' values written into ``buffers`` (the previous case's first-run inputs) where every
    tensor matches in shape, dtype, device and strides; ``args`` unchanged otherwise."""
    if not buffers or len(buffers) != len(args):
        return args
    for old, new in zip(buffers, args):
        if isinstance(new, torch.Tensor) != isinstance(old, torch.Tensor):
            return args
        if isinstance(new, torch.Tensor) and (
            type(old) is not torch.Tensor
            or old.shape != new.shape
            or old.dtype != new.dtype
            or old.device != new.device
            or _stride(old) != _stride(new)
            or not _is_contiguous(old)  # an expanded (stride 0) buffer cannot take new values
        ):
            return args
    return [_copy(old, new) if isinstance(new, torch.Tensor) else new for old, new in zip(buffers, args)]
