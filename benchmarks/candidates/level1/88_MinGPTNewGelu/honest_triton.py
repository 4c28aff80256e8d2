"""GELU, tanh approximation (minGPT): an honest Triton kernel for KernelBench level1/88_MinGPTNewGelu.py.

How: one pass, 1024 elements a program.

Measured (NVIDIA H100 80GB HBM3, torch 2.11.0+cu130, Triton 3.6.0; kernelproof source d7252889ceaa,
2026-12-07, alone on the device): pass, 4 of 4 cases; 8.96x eager (95 % CI 8.94-8.97); 1.00x compile
(95 % CI 1.00-1.00); the kernel 0.1789 ms at the 'default' shape (median, cold, 5 interleaved
rounds).
CPU (Triton's interpreter, correctness only, at the task's cpu_sizes in manifest.json): pass, 16 of
16 cases, 2026-12-06.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK = 1024


@triton.jit
def _new_gelu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    inner = 0.7978845608028654 * (x + 0.044715 * x * x * x)
    e = tl.exp(-2.0 * tl.abs(inner))
    t = (1.0 - e) / (1.0 + e)
    t = tl.where(inner < 0.0, -t, t)
    y = 0.5 * x * (1.0 + t)
    tl.store(y_ptr + offs, y, mask=mask)


def _launch(x):
    x = x.contiguous()
    y = torch.empty_like(x)
    n = x.numel()
    _new_gelu_kernel[(triton.cdiv(n, BLOCK),)](x, y, n, BLOCK=BLOCK)
    return y


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return _launch(x)
