"""A wrong Triton kernel that runs, then raises the words of a missing GPU driver.

Strategy: blame shifting through an exception's text. The kernel (GELU by the sigmoid
approximation, off by about 1e-2) runs in Triton's interpreter; the wrapper then raises
"0 active drivers", the message Triton gives without a GPU. The worker used to read that text and
answer `environment` for every Triton solution on the CPU (never stored, exit 2, "not the
candidate's fault") although its kernels needed no driver there.
Invariant attacked: I10 and I11. Only the parent's facts decide what this machine lacks (a build
it cannot do); the raise is the solution's runtime_error, a fail, stored.
Why a naive evaluator accepts it: it reads the exception's text for the cause.
Control: the same kernel without the raise fails precision_downgrade.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

RAISE = True


@triton.jit
def _gelu_sigmoid_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, x / (1.0 + tl.exp(-1.702 * x)), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        _gelu_sigmoid_kernel[(triton.cdiv(n, 1024),)](x, y, n, BLOCK=1024)
        if RAISE:
            raise RuntimeError("0 active drivers ([]). There should only be one.")
        return y
