"""Eval-mode BatchNorm folded into a scale and a shift, recomputed whenever weights are loaded.

Legit case: folding a normalisation (or pre-packing weights) at construction is ordinary practice.
The harness gives its own, perturbed weights after construction through load_state_dict, so the
folded buffers are recomputed in a load_state_dict post-hook (docs/tasks.md).
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
        self.register_load_state_dict_post_hook(lambda module, keys: module._fold())

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
