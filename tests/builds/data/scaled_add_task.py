"""A simple elementwise task for the native backend's example: out = x + alpha * y."""

import torch
import torch.nn as nn

n = 1 << 24  # 16 Mi elements: 64 MiB per fp32 tensor, a bandwidth-bound op

KERNELPROOF = {
    "variants": {"small": {"n": 4096}, "odd": {"n": 1000003}},
    "domains": ["any", "any"],
    "bytes": "3 * 4 * n",
    "flops": "2 * n",
}


class Model(nn.Module):
    def __init__(self, alpha: float):
        super().__init__()
        self.alpha = alpha

    def forward(self, x, y):
        return x + self.alpha * y


def get_inputs():
    return [torch.rand(n), torch.rand(n)]


def get_init_inputs():
    return [0.5]
