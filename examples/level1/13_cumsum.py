"""Inclusive cumsum along the last dimension in one Triton kernel, fp32 in and out.

One program scans one row in 1024-element blocks: tl.cumsum scans the block in registers and a
running carry holds the total of the blocks before it. The scan and the carry are kept in fp64, so
the only error of note in each output is its final rounding to fp32 (an fp32 carry would grow an
error along the row); the kernel is memory-bound, so the fp64 adds cost nothing measurable. One
read and one write per element.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK = 1024


@triton.jit
def _cumsum_rows_kernel(x_ptr, y_ptr, length, stride_x, stride_y, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    x_row = x_ptr + row * stride_x
    y_row = y_ptr + row * stride_y
    carry = tl.zeros((), dtype=tl.float64)
    for start in range(0, length, BLOCK):
        idx = start + offs
        mask = idx < length
        x = tl.load(x_row + idx, mask=mask, other=0.0).to(tl.float64)
        scan = tl.cumsum(x, axis=0) + carry
        tl.store(y_row + idx, scan.to(tl.float32), mask=mask)
        carry += tl.sum(x, axis=0)


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        moved = x.movedim(self.dim, -1).contiguous()
        rows = moved.numel() // moved.shape[-1]
        flat = moved.view(rows, moved.shape[-1])
        y = torch.empty_like(flat)
        _cumsum_rows_kernel[(rows,)](
            flat, y, flat.shape[1], flat.stride(0), y.stride(0), BLOCK=BLOCK, num_warps=4
        )
        return y.view(moved.shape).movedim(-1, self.dim)
