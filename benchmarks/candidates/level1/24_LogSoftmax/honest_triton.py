"""LogSoftmax over dim 1: an honest Triton kernel for KernelBench level1/24_LogSoftmax.py.

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
def _log_softmax_kernel(x_ptr, y_ptr, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * cols
    y_row = y_ptr + row * cols
    m = tl.full((BLOCK,), float("-inf"), tl.float32)
    s = tl.zeros((BLOCK,), tl.float32)
    for start in range(0, cols, BLOCK):
        c = start + tl.arange(0, BLOCK)
        x = tl.load(x_row + c, mask=c < cols, other=float("-inf"))
        m_new = tl.maximum(m, x)
        s = s * tl.exp(tl.where(m == m_new, 0.0, m - m_new)) + tl.where(
            x == float("-inf"), 0.0, tl.exp(x - m_new)
        )
        m = m_new
    row_max = tl.max(m, 0)
    total = tl.sum(s * tl.exp(tl.where(m == float("-inf"), float("-inf"), m - row_max)), 0)
    lse = row_max + tl.log(total)
    for start in range(0, cols, BLOCK):
        c = start + tl.arange(0, BLOCK)
        x = tl.load(x_row + c, mask=c < cols, other=0.0)
        y = x - lse
        tl.store(y_row + c, y, mask=c < cols)


def _launch(x):
    x = x.contiguous()
    y = torch.empty_like(x)
    rows, cols = x.shape
    _log_softmax_kernel[(rows,)](x, y, cols, BLOCK=BLOCK)
    return y


class ModelNew(nn.Module):
    def __init__(self, dim: int = 1):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return _launch(x)
