"""Residual add and LayerNorm fused into one Triton row kernel, fp32: three passes over memory.

Each program reads one row of x and of the residual, adds them in registers (the same fp32 sum the
reference forms), normalises with the mean and the variance of the centred values, applies the
affine transform and stores once; the sum is never written. Divisions and the square root are
IEEE-rounded.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _add_layer_norm_kernel(
    x_ptr, r_ptr, w_ptr, b_ptr, y_ptr, n_cols, stride_x, stride_r, stride_y, eps, BLOCK: tl.constexpr
):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0)
    x += tl.load(r_ptr + row * stride_r + cols, mask=mask, other=0.0)
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
        self.norm = nn.LayerNorm(hidden)

    def forward(self, x, residual):
        if x.stride(-1) != 1:
            x = x.contiguous()
        if residual.stride(-1) != 1:
            residual = residual.contiguous()
        rows, cols = x.shape
        y = torch.empty((rows, cols), device=x.device, dtype=torch.float32)
        block = triton.next_power_of_2(cols)
        _add_layer_norm_kernel[(rows,)](
            x,
            residual,
            self.norm.weight,
            self.norm.bias,
            y,
            cols,
            x.stride(0),
            residual.stride(0),
            y.stride(0),
            self.norm.eps,
            BLOCK=block,
            num_warps=max(1, min(16, block // 512)),
        )
        return y
