"""level1/39_L2Norm_.py: Division by the L2 norm of each row, a Triton kernel below the fp32 contract.

The downgrade: the row read through bfloat16 in both passes: about 3e-3 relative.
Expected: precision_downgrade (or mismatch).
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK = 1024


@triton.jit
def _l2_norm_kernel(x_ptr, y_ptr, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * cols
    y_row = y_ptr + row * cols
    acc = tl.zeros((BLOCK,), tl.float32)
    for start in range(0, cols, BLOCK):
        c = start + tl.arange(0, BLOCK)
        x = tl.load(x_row + c, mask=c < cols, other=0.0)
        x = x.to(tl.bfloat16).to(tl.float32)
        acc += x * x
    norm = tl.sqrt(tl.sum(acc, 0))
    for start in range(0, cols, BLOCK):
        c = start + tl.arange(0, BLOCK)
        x = tl.load(x_row + c, mask=c < cols, other=0.0).to(tl.bfloat16).to(tl.float32)
        y = x / norm
        tl.store(y_row + c, y, mask=c < cols)


def _launch(x):
    x = x.contiguous()
    y = torch.empty_like(x)
    rows, cols = x.shape
    _l2_norm_kernel[(rows,)](x, y, cols, BLOCK=BLOCK)
    return y


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return _launch(x)
