"""Row mean as a split reduction: block partial sums combined with tl.atomic_add.

Legit case: atomics make the order of the final additions vary from run to run, so two runs on
the same inputs may differ in the last bits. The partial sums go into a workspace from
torch.zeros (not torch.empty: the kernel reads it), and the result must still pass the
determinism check (two runs within the contract's tolerance) and the fp32 comparison.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK = 256


@triton.jit
def _partial_sum_kernel(x_ptr, ws_ptr, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    blk = tl.program_id(1)
    offs = blk * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * cols + offs, mask=offs < cols, other=0.0)
    tl.atomic_add(ws_ptr + row, tl.sum(x, axis=0))


@triton.jit
def _divide_kernel(ws_ptr, y_ptr, rows, cols, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < rows
    tl.store(y_ptr + offs, tl.load(ws_ptr + offs, mask=mask) / cols, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        rows, cols = x.shape
        workspace = torch.zeros(rows, device=x.device, dtype=torch.float32)
        y = torch.empty(rows, device=x.device, dtype=torch.float32)
        _partial_sum_kernel[(rows, triton.cdiv(cols, BLOCK))](x, workspace, cols, BLOCK=BLOCK)
        _divide_kernel[(triton.cdiv(rows, BLOCK),)](workspace, y, rows, cols, BLOCK=BLOCK)
        return y
