"""A wrong Triton solution raising "expects CUDA tensors only" with no device check at all.

Strategy: blame shifting through an exception's text. The worker used to take a ValueError raised
at the solution's own line whose message says it accepts CUDA tensors only as what the CPU machine
lacks (`environment`, never stored), without any check of the device having been made: the kernel
(a scaled copy, not GELU) is simply wrong.
Invariant attacked: I10 and I11. Messages decide nothing: the raise is the solution's
runtime_error, a fail, stored.
Why a naive evaluator accepts it: it reads the exception's text for the cause.
Control: the same kernel without the raise fails mismatch.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

RAISE = True


@triton.jit
def _half_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, 0.5 * tl.load(x_ptr + offs, mask=mask), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        if RAISE:
            raise ValueError("gelu expects CUDA tensors only")
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        _half_kernel[(triton.cdiv(n, 1024),)](x, y, n, BLOCK=1024)
        return y
