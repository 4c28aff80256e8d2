"""MSE loss to a scalar: block partial sums of squared differences, then one final reduction.

Legit case: a scalar output. The first kernel writes one partial sum per 1024-element block, the
second sums the partials in a fixed order and divides by the element count, so the result is
deterministic and within fp32 rounding of the reference.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK = 1024


@triton.jit
def _sq_diff_partial_kernel(p_ptr, t_ptr, part_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    d = tl.load(p_ptr + offs, mask=mask, other=0.0) - tl.load(t_ptr + offs, mask=mask, other=0.0)
    tl.store(part_ptr + tl.program_id(0), tl.sum(d * d, axis=0))


@triton.jit
def _finish_kernel(part_ptr, out_ptr, n_parts, n, BLOCK: tl.constexpr):
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, n_parts, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        acc += tl.load(part_ptr + offs, mask=offs < n_parts, other=0.0)
    tl.store(out_ptr, tl.sum(acc, axis=0) / n)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, predictions, targets):
        p = predictions.contiguous()
        t = targets.contiguous()
        n = p.numel()
        n_parts = triton.cdiv(n, BLOCK)
        parts = torch.empty(n_parts, device=p.device, dtype=torch.float32)
        out = torch.empty((), device=p.device, dtype=torch.float32)
        _sq_diff_partial_kernel[(n_parts,)](p, t, parts, n, BLOCK=BLOCK)
        _finish_kernel[(1,)](parts, out, n_parts, n, BLOCK=BLOCK)
        return out
