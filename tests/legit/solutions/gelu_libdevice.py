"""GELU (tanh approximation) as one fused elementwise kernel, libdevice.tanh on the GPU.

Legit case: `from triton.language.extra import libdevice` is how Triton kernels reach tanh, erf
and friends. Triton's CPU interpreter has no libdevice, so under the interpreter the kernel
spells tanh with exp (2 / (1 + exp(-2u)) - 1) instead: a pattern of code written to run in both
places. The libdevice module is not loaded until a solution imports it, and importing a library
module is something every solution must be allowed to do.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl
from triton.language.extra import libdevice

SQRT_2_OVER_PI = tl.constexpr(0.7978845608028654)  # a plain float global does not compile on a GPU


@triton.jit
def _gelu_tanh_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    inner = SQRT_2_OVER_PI * (x + 0.044715 * x * x * x)
    tl.store(y_ptr + offs, 0.5 * x * (1.0 + libdevice.tanh(inner)), mask=mask)


@triton.jit
def _gelu_tanh_exp_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    inner = SQRT_2_OVER_PI * (x + 0.044715 * x * x * x)
    t = 2.0 / (1.0 + tl.exp(-2.0 * inner)) - 1.0
    tl.store(y_ptr + offs, 0.5 * x * (1.0 + t), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        kernel = _gelu_tanh_kernel if x.is_cuda else _gelu_tanh_exp_kernel
        kernel[(triton.cdiv(n, 1024),)](x, y, n, BLOCK=1024)
        return y
