"""GELU activation (exact, erf form), elementwise, in fp32.

12288 x 16384 is 0.8 GB in and out: about 0.4 ms on an H200, memory-bound (held under 2 GB).
The erf form, not the tanh approximation, is the function to match. Strict.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 12288
dim = 16384


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return F.gelu(x)


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []


KERNELPROOF = {
    "variants": {"small": {"batch_size": 16, "dim": 256}, "odd": {"batch_size": 7, "dim": 333}},
    "cpu": ["small", "odd"],
    "timed": ["default"],
    "precision": "fp32",
    "domains": ["any"],
    "flops": "batch_size * dim",
    "policy": "strict",
}
