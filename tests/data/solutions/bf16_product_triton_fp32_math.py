"""An honest bf16 Triton kernel that computes in fp32 and rounds the product back to bf16."""

import torch
import triton
import triton.language as tl


@triton.jit
def _mul(a_ptr, b_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    a = tl.load(a_ptr + offs, mask=mask).to(tl.float32)
    b = tl.load(b_ptr + offs, mask=mask).to(tl.float32)
    tl.store(out_ptr + offs, (a * b).to(tl.bfloat16), mask=mask)


class ModelNew(torch.nn.Module):
    def forward(self, a, b):
        a, b = a.contiguous(), b.contiguous()
        out = torch.empty_like(a)
        n = a.numel()
        _mul[(triton.cdiv(n, 1024),)](a, b, out, n, BLOCK=1024)
        return out
