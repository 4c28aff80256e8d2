"""Per-sample cross-entropy fused into one Triton kernel, fp32: the logits are read once.

Each program holds one row of logits in registers and computes loss = (max + log(sum(exp(x - max))))
- x[target], the reference's log-softmax and NLL without writing the log-probabilities out. exp is
computed by Cody-Waite reduction (a couple of ulp for any argument). Targets are read as int64.
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
def _cross_entropy_kernel(x_ptr, t_ptr, loss_ptr, n_cols, stride_x, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    row_ptr = x_ptr + row * stride_x
    x = tl.load(row_ptr + cols, mask=mask, other=-float("inf"))
    row_max = tl.max(x, axis=0)
    total = tl.sum(tl.where(mask, _exp(x - row_max), 0.0), axis=0)
    target = tl.load(t_ptr + row)
    x_target = tl.load(row_ptr + target)
    tl.store(loss_ptr + row, (row_max + tl.log(total)) - x_target)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, predictions, targets):
        if predictions.stride(-1) != 1:
            predictions = predictions.contiguous()
        targets = targets.contiguous()
        rows, cols = predictions.shape
        loss = torch.empty((rows,), device=predictions.device, dtype=torch.float32)
        block = triton.next_power_of_2(cols)
        _cross_entropy_kernel[(rows,)](
            predictions,
            targets,
            loss,
            cols,
            predictions.stride(0),
            BLOCK=block,
            num_warps=max(1, min(16, block // 512)),
        )
        return loss
