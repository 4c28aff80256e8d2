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


def earlier(buffers: list[Any], args: list[Any]) -> list[Any]:
    """``args``' values written into ``buffers`` (the previous case's first-run inputs) where every
    tensor matches in shape, dtype, device and strides; ``args`` unchanged otherwise."""
    if not buffers or len(buffers) != len(args):
        return args
    for old, new in zip(buffers, args):
        if isinstance(new, torch.Tensor) != isinstance(old, torch.Tensor):
            return args
        if isinstance(new, torch.Tensor) and (
            old.shape != new.shape
            or old.dtype != new.dtype
            or old.device != new.device
            or old.stride() != new.stride()
            or not old.is_contiguous()  # an expanded (stride 0) buffer cannot take new values
        ):
            return args
    return [old.copy_(new) if isinstance(new, torch.Tensor) else new for old, new in zip(buffers, args)]
