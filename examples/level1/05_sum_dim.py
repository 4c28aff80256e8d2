"""Sum over one dimension with a single Triton reduction kernel, fp32.

The input is viewed as (outer, reduced, inner) without copying. Each program owns one outer index
and a 64-wide strip of the contiguous inner axis, walks the reduced axis in 32-row tiles
(coalesced 256-byte row segments) and keeps a (32 x 64) tile of partial sums, reduced once at the end.
The partial sums are fp64, so the only error of note is the final rounding to fp32; the kernel is
memory-bound, so the fp64 adds cost nothing measurable.
"""

import math

import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK_R = 32
BLOCK_C = 64


@triton.jit
def _sum_mid_kernel(x_ptr, y_ptr, R, C, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    pid_c = tl.program_id(0)
    outer = tl.program_id(1)
    offs_c = pid_c * BLOCK_C + tl.arange(0, BLOCK_C)
    offs_r = tl.arange(0, BLOCK_R)
    c_ok = offs_c[None, :] < C
    base = x_ptr + outer.to(tl.int64) * R * C
    acc = tl.zeros((BLOCK_R, BLOCK_C), dtype=tl.float64)
    for r0 in range(0, R, BLOCK_R):
        r = r0 + offs_r
        x = tl.load(base + r[:, None] * C + offs_c[None, :], mask=(r[:, None] < R) & c_ok, other=0.0)
        acc += x.to(tl.float64)
    tl.store(y_ptr + outer * C + offs_c, tl.sum(acc, axis=0).to(tl.float32), mask=offs_c < C)


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        dim = self.dim % x.dim()
        x = x.contiguous()
        outer = math.prod(x.shape[:dim])
        reduced = x.shape[dim]
        inner = math.prod(x.shape[dim + 1 :])
        y = torch.empty(x.shape[:dim] + x.shape[dim + 1 :], device=x.device, dtype=torch.float32)
        grid = (triton.cdiv(inner, BLOCK_C), outer)
        _sum_mid_kernel[grid](x, y, reduced, inner, BLOCK_R=BLOCK_R, BLOCK_C=BLOCK_C, num_warps=4)
        return y
