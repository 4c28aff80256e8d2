"""Tanh: an honest Triton kernel for KernelBench level1/22_Tanh.py.

How: one pass, 1024 elements a program.

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
def _tanh_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    # small |x|: the odd series (1 - exp(-2|x|) would cancel); elsewhere the exp form
    x2 = x * x
    series = x * (1.0 - x2 * (1.0 / 3.0 - x2 * (2.0 / 15.0 - x2 * (17.0 / 315.0))))
    e = tl.exp(-2.0 * tl.abs(x))
    t = (1.0 - e) / (1.0 + e)
    y = tl.where(tl.abs(x) < 0.125, series, tl.where(x < 0.0, -t, t))
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
