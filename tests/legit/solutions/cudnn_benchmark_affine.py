"""An affine kernel whose module switches cuDNN's benchmark mode on, as published code often does.

cuDNN's benchmark mode picks the fastest of its algorithms at the same precision; it is the
solution's own process, so it is allowed and flagged (numeric_neutral_setting), and the baselines
run with the same setting. Set in __init__ and again in forward (both are common). It used to be
an exploit row (flags_changed); precision settings (TF32, reduced-precision reductions) still are.
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
        self.scale = nn.Parameter(torch.randn(features))
        self.shift = nn.Parameter(torch.randn(features))
        torch.backends.cudnn.benchmark = True

    def forward(self, x):
        torch.backends.cudnn.benchmark = True
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        _affine_kernel[(triton.cdiv(n, 4096),)](x, self.scale, self.shift, y, n, x.shape[-1], BLOCK=4096)
        return y
