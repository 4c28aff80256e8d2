"""level1/19_ReLU.py: ReLU, a Triton kernel whose arithmetic is subtly wrong.

The bug: a leaky slope of 0.01 carried over from LeakyReLU: negative inputs give -0.01 x instead of 0.
Expected: mismatch (precision_downgrade where the error happens to be the size of a lower
precision's, nonfinite where it overflows).
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK = 1024


@triton.jit
def _relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    y = tl.where(x > 0.0, x, 0.01 * x)
    tl.store(y_ptr + offs, y, mask=mask)


def _launch(x):
    x = x.contiguous()
    y = torch.empty_like(x)
    n = x.numel()
    _relu_kernel[(triton.cdiv(n, BLOCK),)](x, y, n, BLOCK=BLOCK)
    return y


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return _launch(x)
