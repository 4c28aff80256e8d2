"""Mean squared error: an honest Triton kernel for KernelBench level1/94_MSELoss.py.

How: partial sums of 16 blocks a program, then one program adds them up.

Measured: not yet measured on a GPU (no verdict, no speedup against eager or torch.compile).
CPU (Triton's interpreter, correctness only, at the task's cpu_sizes in manifest.json): pass, 16 of
16 cases, 2026-12-06.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK = 1024
CHUNK = 16  # blocks per program in the first pass


@triton.jit
def _mse_partial_kernel(p_ptr, t_ptr, part_ptr, n, BLOCK: tl.constexpr, CHUNK: tl.constexpr):
    start = tl.program_id(0).to(tl.int64) * BLOCK * CHUNK
    acc = tl.zeros((BLOCK,), tl.float32)
    for j in range(0, CHUNK):
        offs = start + j * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        d = tl.load(p_ptr + offs, mask=mask, other=0.0) - tl.load(t_ptr + offs, mask=mask, other=0.0)
        acc += d * d
    tl.store(part_ptr + tl.program_id(0), tl.sum(acc, 0))


@triton.jit
def _mse_final_kernel(part_ptr, out_ptr, parts, n, BLOCK: tl.constexpr):
    acc = tl.zeros((BLOCK,), tl.float32)
    for s in range(0, parts, BLOCK):
        idx = s + tl.arange(0, BLOCK)
        acc += tl.load(part_ptr + idx, mask=idx < parts, other=0.0)
    tl.store(out_ptr, tl.sum(acc, 0) / n)


def _launch(predictions, targets):
    p = predictions.contiguous()
    t = targets.contiguous()
    n = p.numel()
    parts = triton.cdiv(n, BLOCK * CHUNK)
    partial = torch.empty(parts, device=p.device, dtype=torch.float32)
    out = torch.empty((), device=p.device, dtype=torch.float32)
    _mse_partial_kernel[(parts,)](p, t, partial, n, BLOCK=BLOCK, CHUNK=CHUNK)
    _mse_final_kernel[(1,)](partial, out, parts, n, BLOCK=BLOCK)
    return out


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, predictions, targets):
        return _launch(predictions, targets)
