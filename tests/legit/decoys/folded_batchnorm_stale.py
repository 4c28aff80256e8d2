"""Eval-mode BatchNorm folded into a scale and a shift, never recomputed (a decoy).

Decoy: the folded buffers are computed once, from the constructor's weights; the harness's
perturbed weights reach the BatchNorm but never the scale and shift: a mismatch whose message
names the perturbation and the buffers.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _affine_kernel(x_ptr, s_ptr, b_ptr, y_ptr, n, features, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    col = offs % features
    x = tl.load(x_ptr + offs, mask=mask)
    s = tl.load(s_ptr + col, mask=mask)
    b = tl.load(b_ptr + col, mask=mask)
    tl.store(y_ptr + offs, x * s + b, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.bn = nn.BatchNorm1d(features)
        self.register_buffer("scale", torch.empty(features), persistent=False)
        self.register_buffer("shift", torch.empty(features), persistent=False)
        self._fold()

    @torch.no_grad()
    def _fold(self):
        bn = self.bn
        scale = bn.weight / torch.sqrt(bn.running_var + bn.eps)
        self.scale.copy_(scale)
        self.shift.copy_(bn.bias - bn.running_mean * scale)

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        _affine_kernel[(triton.cdiv(n, 1024),)](x, self.scale, self.shift, y, n, x.shape[-1], BLOCK=1024)
        return y
