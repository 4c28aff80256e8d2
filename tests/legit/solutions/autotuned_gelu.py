"""GELU (tanh approximation) from an autotuned Triton kernel, as published Triton code is written.

Legit case: ``@triton.autotune`` benchmarks its configs through the GPU driver. Under Triton's
interpreter on a CPU machine there is none; the worker takes the first config there (every
config computes the same function), and on a GPU the tuner runs as usual.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.autotune(
    configs=[triton.Config({"BLOCK": 256}, num_warps=2), triton.Config({"BLOCK": 1024}, num_warps=4)],
    key=["n"],
)
@triton.jit
def _gelu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    inner = 0.7978845608028654 * (x + 0.044715 * x * x * x)
    t = 2.0 / (1.0 + tl.exp(-2.0 * inner)) - 1.0
    tl.store(y_ptr + offs, 0.5 * x * (1.0 + t), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        _gelu_kernel[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, y, n)
        return y
