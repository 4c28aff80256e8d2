"""Sum over one dimension, kept: an honest Triton kernel for KernelBench level1/47_Sum_reduction_over_a_dimension.py.

How: one program sums a column block down the reduced dimension.

Measured: not yet measured on a GPU (no verdict, no speedup against eager or torch.compile).
CPU (Triton's interpreter, correctness only, at the task's cpu_sizes in manifest.json): pass, 16 of
16 cases, 2026-12-06.
"""

import math

import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK = 256


@triton.jit
def _sum_dim_kernel(x_ptr, y_ptr, R, inner, BLOCK: tl.constexpr):
    # x viewed as (outer, R, inner); y as (outer, inner): one program sums R rows of BLOCK columns
    o = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < inner
    base = x_ptr + o * R * inner
    acc = tl.zeros((BLOCK,), tl.float32)
    for r in range(0, R):
        acc += tl.load(base + r * inner + cols, mask=mask, other=0.0)
    tl.store(y_ptr + o * inner + cols, acc, mask=mask)


def _launch(x, dim):
    dim = dim % x.dim()
    x = x.contiguous()
    outer = math.prod(x.shape[:dim])
    R = x.shape[dim]
    inner = math.prod(x.shape[dim + 1 :])
    shape = list(x.shape)
    shape[dim] = 1
    y = torch.empty(shape, device=x.device, dtype=x.dtype)
    _sum_dim_kernel[(outer, triton.cdiv(inner, BLOCK))](x, y, R, inner, BLOCK=BLOCK)
    return y


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return _launch(x, self.dim)
