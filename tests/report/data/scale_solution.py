"""A Triton solution of scale_task.py: one fused kernel, launched on the input's device."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _relu_scale(x_ptr, s_ptr, out_ptr, n, features, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    s = tl.load(s_ptr + offs % features, mask=mask)
    tl.store(out_ptr + offs, tl.maximum(x, 0.0) * s, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.scale = nn.Parameter(torch.randn(features))

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        block = 1024
        _relu_scale[(triton.cdiv(n, block),)](x, self.scale, out, n, x.shape[-1], BLOCK=block)
        return out
