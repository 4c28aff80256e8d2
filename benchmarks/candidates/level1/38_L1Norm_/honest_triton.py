"""Division by the mean absolute value of each row: an honest Triton kernel for KernelBench level1/38_L1Norm_.py.

How: two passes over each row, one program a row.

Measured: not yet measured on a GPU (no verdict, no speedup against eager or torch.compile).
CPU (Triton's interpreter, correctness only, at the task's cpu_sizes in manifest.json): pass, 16 of
16 cases, 2026-12-06.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK = 1024


@triton.jit
def _l1_norm_kernel(x_ptr, y_ptr, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * cols
    y_row = y_ptr + row * cols
    acc = tl.zeros((BLOCK,), tl.float32)
    for start in range(0, cols, BLOCK):
        c = start + tl.arange(0, BLOCK)
        x = tl.load(x_row + c, mask=c < cols, other=0.0)
        acc += tl.abs(x)
    mean_abs = tl.sum(acc, 0) / cols
    for start in range(0, cols, BLOCK):
        c = start + tl.arange(0, BLOCK)
        x = tl.load(x_row + c, mask=c < cols, other=0.0)
        y = x / mean_abs
        tl.store(y_row + c, y, mask=c < cols)


def _launch(x):
    x = x.contiguous()
    y = torch.empty_like(x)
    rows, cols = x.shape
    _l1_norm_kernel[(rows,)](x, y, cols, BLOCK=BLOCK)
    return y


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return _launch(x)
