"""Decoy: a Triton kernel that touches one element, then torch.softmax does the work.

Must fail coverage (the softmax reads the whole input: never a small epilogue).
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _touch_kernel(x_ptr):
    tl.store(x_ptr, tl.load(x_ptr))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        scratch = torch.zeros(1, device=x.device)
        _touch_kernel[(1,)](scratch)
        return torch.softmax(x, dim=-1)
