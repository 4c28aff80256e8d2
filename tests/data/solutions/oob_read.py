"""Correct outputs, but every program also reads past the end of its input (an unused load).

A comparison cannot see it; compute-sanitizer's memcheck can (``--sanitize``, which turns the
caching allocator off so every tensor is an allocation of its own). The read stays within 256
bytes past the end: in a plain run it lands in the caching allocator's next block of the same
segment and cannot fault (a read 16 MB past the end faulted on an H200 once the memory layout
changed).
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def oob_kernel(x_ptr, s_ptr, b_ptr, y_ptr, n, features, flag, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    junk = tl.load(x_ptr + n + offs % 64)  # unmasked, up to 256 bytes past the end
    col = offs % features
    s = tl.load(s_ptr + col, mask=mask)
    b = tl.load(b_ptr + col, mask=mask)
    y = tl.maximum(x, 0.0) * s + b + tl.where(flag != 0, junk, 0.0)
    tl.store(y_ptr + offs, y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.scale = nn.Parameter(torch.randn(features))
        self.bias = nn.Parameter(torch.randn(features))

    def forward(self, x):
        y = torch.empty_like(x)
        n = x.numel()
        oob_kernel[(triton.cdiv(n, 256),)](x, self.scale, self.bias, y, n, x.shape[-1], 0, BLOCK=256)
        return y
