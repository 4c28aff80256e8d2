"""Inclusive prefix sum (cumsum) along the last dimension of a (batch, length) matrix, in fp32.

Rows of 16384 are longer than one block, so a kernel must carry the running total across blocks
(the CPU variants are sized to cross a 1024-element block too). 12288 x 16384 is 0.8 GB in and out:
about 0.4 ms on an H200, memory-bound (held under 2 GB). Strict.
"""

import torch
import torch.nn as nn

batch_size = 12288
length = 16384
scan_dim = 1


class Model(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return torch.cumsum(x, dim=self.dim)


def get_inputs():
    return [torch.randn(batch_size, length)]


def get_init_inputs():
    return [scan_dim]


KERNELPROOF = {
    "variants": {"small": {"batch_size": 4, "length": 2048}, "odd": {"batch_size": 3, "length": 1333}},
    "cpu": ["small", "odd"],
    "timed": ["default"],
    "precision": "fp32",
    "domains": ["any"],
    "flops": "batch_size * length",
    "policy": "strict",
}
