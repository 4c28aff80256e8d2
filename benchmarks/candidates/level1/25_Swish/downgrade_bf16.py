"""level1/25_Swish.py: Swish (x * sigmoid(x)), a Triton kernel below the fp32 contract.

The downgrade: input and output rounded through bfloat16 (bf16 storage, the bandwidth halved): about 3e-3 relative.
Expected: precision_downgrade (or mismatch).
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK = 1024


@triton.jit
def _swish_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.bfloat16).to(tl.float32)
    y = x / (1.0 + tl.exp(-x))
    tl.store(y_ptr + offs, y.to(tl.bfloat16).to(tl.float32), mask=mask)


def _launch(x):
    x = x.contiguous()
    y = torch.empty_like(x)
    n = x.numel()
    _swish_kernel[(triton.cdiv(n, BLOCK),)](x, y, n, BLOCK=BLOCK)
    return y


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return _launch(x)
