"""Row softmax in one Triton kernel, fp32: one read and one write per element.

A program holds a whole row in registers (rows of 16384 fit in 16 warps), so max, exponentials, sum
and normalisation need no second pass over memory. exp is computed by Cody-Waite reduction
(x = n ln2 + r, 2^n built exactly from its bits, only 2^r left to the hardware exp2) so it stays
within a couple of ulp for any argument, and the normalising division is IEEE-rounded, to match
the reference's own accuracy.
"""

import torch
import torch.nn as nn
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
def _softmax_kernel(x_ptr, y_ptr, n_cols, stride_x, stride_y, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=-float("inf"))
    row_max = tl.max(x, axis=0)
    e = tl.where(mask, _exp(x - row_max), 0.0)
    total = tl.sum(e, axis=0)
    tl.store(y_ptr + row * stride_y + cols, tl.div_rn(e, total), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x2 = x.reshape(-1, x.shape[-1])
        if x2.stride(-1) != 1:
            x2 = x2.contiguous()
        rows, cols = x2.shape
        y = torch.empty((rows, cols), device=x.device, dtype=torch.float32)
        block = triton.next_power_of_2(cols)
        _softmax_kernel[(rows,)](
            x2, y, cols, x2.stride(0), y.stride(0), BLOCK=block, num_warps=max(1, min(16, block // 1024))
        )
        return y.view(x.shape)
