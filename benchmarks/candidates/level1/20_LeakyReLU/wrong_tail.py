"""level1/20_LeakyReLU.py: LeakyReLU, a Triton kernel with an off-by-one tail.

The bug: the mask stops one element short (offs < n - 1): the last element of the output is never
written and holds whatever the allocator left there.
Expected: mismatch (or nonfinite, nondeterministic: the unwritten memory is poisoned).
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK = 1024


@triton.jit
def _leaky_relu_kernel(x_ptr, y_ptr, n, slope, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n - 1
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    y = tl.where(x > 0.0, x, x * slope)
    tl.store(y_ptr + offs, y, mask=mask)


def _launch(x, slope):
    x = x.contiguous()
    y = torch.empty_like(x)
    n = x.numel()
    _leaky_relu_kernel[(triton.cdiv(n, BLOCK),)](x, y, n, slope, BLOCK=BLOCK)
    return y


class ModelNew(nn.Module):
    def __init__(self, negative_slope: float = 0.01):
        super().__init__()
        self.negative_slope = negative_slope

    def forward(self, x):
        return _launch(x, self.negative_slope)
