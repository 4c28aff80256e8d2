"""Linear in cuBLAS, then tanh and the row sum fused into one Triton row kernel, fp32.

Under the library-ok policy the GEMM (with its bias) stays in the library; one program per row
reads the 8192 pre-activations once and writes one number, where eager writes and rereads the tanh
output. tanh(x) = sign(x) (1 - t) / (1 + t) with t = exp(-2|x|) never overflows; exp is computed by
Cody-Waite reduction and the division is IEEE-rounded. The row sum is accumulated in fp64, so the
cancellation of a zero-mean sum costs no accuracy.
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
def _tanh_rowsum_kernel(x_ptr, y_ptr, n_cols, stride_x, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK,), dtype=tl.float64)
    for start in range(0, n_cols, BLOCK):
        cols = start + offs
        x = tl.load(x_ptr + row * stride_x + cols, mask=cols < n_cols, other=0.0)
        t = _exp(-2.0 * tl.abs(x))
        th = tl.div_rn(1.0 - t, 1.0 + t)
        acc += tl.where(x < 0, -th, th).to(tl.float64)
    tl.store(y_ptr + row, tl.sum(acc, axis=0).to(tl.float32))


class ModelNew(nn.Module):
    def __init__(self, in_features, hidden):
        super().__init__()
        self.linear = nn.Linear(in_features, hidden)

    def forward(self, x):
        h = F.linear(x, self.linear.weight, self.linear.bias)
        rows, cols = h.shape
        y = torch.empty((rows, 1), device=x.device, dtype=torch.float32)
        block = min(2048, triton.next_power_of_2(cols))
        _tanh_rowsum_kernel[(rows,)](h, y, cols, h.stride(0), BLOCK=block, num_warps=4)
        return y
