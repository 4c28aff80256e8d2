"""Softmax over the last dimension of a (batch, dim) matrix, in fp32.

Rows of 16384 fit one program's registers, so a kernel can read once and write once.
12288 x 16384 is 0.8 GB in and 0.8 GB out: about 0.4 ms on an H200, memory-bound (held under 2 GB).
Strict.
"""

import torch
import torch.nn as nn

batch_size = 12288
dim = 16384


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.softmax(x, dim=-1)


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []


KERNELPROOF = {
    "variants": {"small": {"batch_size": 16, "dim": 256}, "odd": {"batch_size": 7, "dim": 129}},
    "cpu": ["small", "odd"],
    "timed": ["default"],
    "precision": "fp32",
    "domains": ["any"],
    "flops": "5 * batch_size * dim",
    "policy": "strict",
}
