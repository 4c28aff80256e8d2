"""The in-place affine map, in place: the kernel stores x * scale + shift over x and returns x.

Legit case for a task that is in place by contract (tasks/scale_shift_inplace.py: the reference
itself does x.mul_(scale).add_(shift) and returns x). Returning the input and changing it is what
the reference does, so it cannot be held against the solution.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _affine_inplace_kernel(x_ptr, s_ptr, b_ptr, n, features, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    col = offs % features
    x = tl.load(x_ptr + offs, mask=mask)
    s = tl.load(s_ptr + col, mask=mask)
    b = tl.load(b_ptr + col, mask=mask)
    tl.store(x_ptr + offs, x * s + b, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.scale = nn.Parameter(torch.randn(features))
        self.shift = nn.Parameter(torch.randn(features))

    def forward(self, x):
        n = x.numel()
        _affine_inplace_kernel[(triton.cdiv(n, 1024),)](x, self.scale, self.shift, n, x.shape[-1], BLOCK=1024)
        return x
