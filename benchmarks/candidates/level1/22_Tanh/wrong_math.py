"""level1/22_Tanh.py: Tanh, a Triton kernel whose arithmetic is subtly wrong.

The bug: exp2 without the log2(e) factor: tanh(x ln 2).
Expected: mismatch (precision_downgrade where the error happens to be the size of a lower
precision's, nonfinite where it overflows).
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK = 1024


@triton.jit
def _tanh_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    e = tl.exp2(-2.0 * tl.abs(x))
    t = (1.0 - e) / (1.0 + e)
    y = tl.where(x < 0.0, -t, t)
    tl.store(y_ptr + offs, y, mask=mask)


def _launch(x):
    x = x.contiguous()
    y = torch.empty_like(x)
    n = x.numel()
    _tanh_kernel[(triton.cdiv(n, BLOCK),)](x, y, n, BLOCK=BLOCK)
    return y


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return _launch(x)
