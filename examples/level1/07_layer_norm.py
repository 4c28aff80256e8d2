"""Layer normalization in one Triton kernel, fp32: one read and one write per element.

Each program normalises one row held in registers: the mean, then the variance of the centred values
(two passes over registers, not memory, so no cancellation from E[x^2] - E[x]^2), then the affine
transform. The reciprocal standard deviation uses IEEE-rounded sqrt and division.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _layer_norm_kernel(x_ptr, w_ptr, b_ptr, y_ptr, n_cols, stride_x, stride_y, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0)
    mean = tl.div_rn(tl.sum(x, axis=0), n_cols.to(tl.float32))
    xc = tl.where(mask, x - mean, 0.0)
    var = tl.div_rn(tl.sum(xc * xc, axis=0), n_cols.to(tl.float32))
    rstd = tl.div_rn(1.0, tl.sqrt_rn(var + eps))
    w = tl.load(w_ptr + cols, mask=mask, other=0.0)
    b = tl.load(b_ptr + cols, mask=mask, other=0.0)
    tl.store(y_ptr + row * stride_y + cols, xc * rstd * w + b, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.norm = nn.LayerNorm(hidden, eps=1e-5)

    def forward(self, x):
        x2 = x.reshape(-1, x.shape[-1])
        if x2.stride(-1) != 1:
            x2 = x2.contiguous()
        rows, cols = x2.shape
        y = torch.empty((rows, cols), device=x.device, dtype=torch.float32)
        block = triton.next_power_of_2(cols)
        _layer_norm_kernel[(rows,)](
            x2,
            self.norm.weight,
            self.norm.bias,
            y,
            cols,
            x2.stride(0),
            y.stride(0),
            self.norm.eps,
            BLOCK=block,
            num_warps=max(1, min(16, block // 512)),
        )
        return y.view(x.shape)
