"""Row mean as block partial sums in Triton, combined by a small ATen epilogue.

Legit case (issue 18): the Triton kernel reads every element and does all the real work; the
epilogue sums a handful of partial sums per row and divides once, in PyTorch. Launch accounting
must count the solution's launch and list the epilogue's ops (aten::sum, aten::div), not refuse it:
on the CPU only the presence of a launch of its own is judged, on a GPU each kernel's time above the
launch floor.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK = 256


@triton.jit
def _partial_sums_kernel(x_ptr, part_ptr, cols, blocks, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    blk = tl.program_id(1)
    offs = blk * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * cols + offs, mask=offs < cols, other=0.0)
    tl.store(part_ptr + row * blocks + blk, tl.sum(x, axis=0))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        rows, cols = x.shape
        blocks = triton.cdiv(cols, BLOCK)
        partial = torch.empty(rows, blocks, device=x.device, dtype=torch.float32)
        _partial_sums_kernel[(rows, blocks)](x, partial, cols, blocks, BLOCK=BLOCK)
        return partial.sum(dim=1) / cols
