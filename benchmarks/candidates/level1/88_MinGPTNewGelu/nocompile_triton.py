"""level1/88_MinGPTNewGelu.py: GELU, tanh approximation (minGPT), a Triton kernel that does not compile.

The bug: BLOCK = 1000: tl.arange needs a power-of-two range, and Triton refuses to compile the
kernel at its first launch.
Expected: compile_error or runtime_error (Triton compiles at the first launch, inside forward).
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK = 1000


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
