"""GELU with the tanh approximation, elementwise, in fp32.

A legit-zoo task for kernels that reach for Triton's libdevice (tanh has no tl. builtin), the
usual way Triton code spells transcendental functions.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 64
dim = 512


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return F.gelu(x, approximate="tanh")


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []


KERNELPROOF = {
    "variants": {"small": {"batch_size": 8, "dim": 64}, "odd": {"batch_size": 7, "dim": 33}},
    "cpu": ["small", "odd"],
    "precision": "fp32",
    "flops": "8 * batch_size * dim",
}
