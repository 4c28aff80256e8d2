"""GELU (tanh) from a Triton kernel whose wrapper asserts its inputs are CUDA tensors.

Legit case: published GPU kernels check their inputs (`assert x.is_cuda`). On a GPU it passes. On
the CPU the check raises: a `runtime_error` of the solution's with the parent's note that the
evaluation ran without a CUDA device. Its words cannot make it `environment`: the same words from a
wrong solution would excuse it, and only the parent's facts (a build the machine cannot do) decide
that (kernelproof/evaluate/machine.py).
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _gelu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    inner = 0.7978845608028654 * (x + 0.044715 * x * x * x)
    t = 2.0 / (1.0 + tl.exp(-2.0 * inner)) - 1.0
    tl.store(y_ptr + offs, 0.5 * x * (1.0 + t), mask=mask)


def gelu(x: torch.Tensor) -> torch.Tensor:
    assert x.is_cuda, "Input must be a CUDA tensor"
    x = x.contiguous()
    y = torch.empty_like(x)
    n = x.numel()
    _gelu_kernel[(triton.cdiv(n, 1024),)](x, y, n, BLOCK=1024)
    return y


class ModelNew(nn.Module):
    def forward(self, x):
        return gelu(x)
