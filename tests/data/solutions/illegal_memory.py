import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def bad_store_kernel(y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs + (1 << 40), 1.0)  # far outside the allocation


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()

    def forward(self, x):
        y = torch.empty_like(x)
        bad_store_kernel[(1,)](y, y.numel(), BLOCK=128)
        return y
