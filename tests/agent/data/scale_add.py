"""A tiny elementwise task: y = x * 2 + 1, for the agent's end-to-end test."""

import torch
import torch.nn as nn

batch_size = 64
features = 96


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x * 2.0 + 1.0


def get_inputs():
    return [torch.randn(batch_size, features)]


def get_init_inputs():
    return []


KERNELPROOF = {
    "variants": {"small": {"batch_size": 4, "features": 33}, "odd": {"batch_size": 7, "features": 129}},
    "precision": "fp32",
    "policy": "strict",
    "flops": "2 * batch_size * features",
}
