"""Attack on the back-to-back batch: compute only the call the parent used to check.

A back-to-back batch's inputs are slices of one draw, so a call can tell where it stands: its
input's offset in the storage is its index, the storage's size the batch's length (three warm-up
calls follow the timed ones). Only the last timed call's output was ever checked, so this solution
computes that one and returns zeros from every other back-to-back call: a steady figure of almost
nothing. Every call of the cold rounds (fresh tensors of their own) is computed honestly. The
parent now checks calls it picks after the reply, any of them: ``stale_output``.
"""

import torch
import torch.nn as nn

WARMUP = 3  # kernelproof.inputs.STEADY_WARMUP_CALLS


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.scale = nn.Parameter(torch.randn(features))
        self.bias = nn.Parameter(torch.randn(features))

    def forward(self, x):
        whole = x.untyped_storage().nbytes() // max(1, x.nbytes)
        if whole > 1:  # a slice of a back-to-back batch's draw
            index = x.storage_offset() // max(1, x.numel())
            if index != whole - WARMUP - 1:
                return torch.zeros_like(x)
        return torch.relu(x) * self.scale + self.bias
