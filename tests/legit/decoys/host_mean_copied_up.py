"""Decoy: the row means are computed on the host and copied up; a Triton kernel touches one element.

Must fail coverage: the device-to-host copy of the input and the host-to-device copy of the result
are counted (a copy is never data movement set aside unless device-to-device).
"""

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
        out = x.cpu().mean(dim=-1).to(x.device)
        _touch_kernel[(1,)](out)
        return out
