"""Linear in cuBLAS, then exact GELU and row softmax fused into one Triton row kernel, fp32.

Under the library-ok policy the GEMM (with its bias) stays in the library. One program per row
holds the 4096 features in registers, applies GELU, then the softmax (max, exponentials, sum,
IEEE-rounded division) and stores once. exp is computed by Cody-Waite reduction (a couple of ulp
for any argument).
"""

import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def _exp(x):
    x = tl.minimum(
        tl.maximum(x, -104.0, propagate_nan=tl.PropagateNan.ALL), 104.0, propagate_nan=tl.PropagateNan.ALL
    )
    n = tl.floor(x * 1.4426950408889634 + 0.5)
    r = x - n * 0.693359375
    r = r - n * -2.12194440e-4
    ni = n.to(tl.int32)
    half = ni >> 1
    p1 = ((half + 127) << 23).to(tl.float32, bitcast=True)
    p2 = ((ni - half + 127) << 23).to(tl.float32, bitcast=True)
    return tl.exp2(r * 1.4426950408889634) * p1 * p2


@triton.jit
def _gelu_softmax_kernel(x_ptr, y_ptr, n_cols, stride_x, stride_y, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0)
    g = x * 0.5 * (1.0 + tl.math.erf(x * 0.7071067811865476))
    g = tl.where(mask, g, -float("inf"))
    e = tl.where(mask, _exp(g - tl.max(g, axis=0)), 0.0)
    tl.store(y_ptr + row * stride_y + cols, tl.div_rn(e, tl.sum(e, axis=0)), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        h = F.linear(x, self.linear.weight, self.linear.bias)
        rows, cols = h.shape
        y = torch.empty_like(h)
        block = triton.next_power_of_2(cols)
        _gelu_softmax_kernel[(rows,)](
            h, y, cols, h.stride(0), y.stride(0), BLOCK=block, num_warps=max(1, min(16, block // 512))
        )
        return y
