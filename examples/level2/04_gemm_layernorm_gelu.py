"""Linear in cuBLAS, then LayerNorm and exact GELU fused into one Triton row kernel, fp32.

Under the library-ok policy the GEMM (with its bias) stays in the library. One program per row
holds the 4096 features in registers: mean, variance of the centred values, the affine transform
and the GELU, then one store, replacing eager's two passes and the intermediate normalised tensor.
The divisions and the square root are IEEE-rounded.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def _layer_norm_gelu_kernel(x_ptr, w_ptr, b_ptr, y_ptr, n_cols, stride_x, stride_y, eps, BLOCK: tl.constexpr):
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
    z = xc * rstd * w + b
    y = z * 0.5 * (1.0 + tl.math.erf(z * 0.7071067811865476))
    tl.store(y_ptr + row * stride_y + cols, y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.norm = nn.LayerNorm(out_features)

    def forward(self, x):
        h = F.linear(x, self.linear.weight, self.linear.bias)
        rows, cols = h.shape
        y = torch.empty_like(h)
        block = triton.next_power_of_2(cols)
        _layer_norm_gelu_kernel[(rows,)](
            h,
            self.norm.weight,
            self.norm.bias,
            y,
            cols,
            h.stride(0),
            y.stride(0),
            self.norm.eps,
            BLOCK=block,
            num_warps=max(1, min(16, block // 512)),
        )
        return y
