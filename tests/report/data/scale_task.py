"""A tiny task for end-to-end tests: relu(x) * scale, small enough for Triton's CPU interpreter."""

import torch
import torch.nn as nn

batch_size = 64
features = 256


class Model(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.scale = nn.Parameter(torch.randn(features))

    def forward(self, x):
        return torch.relu(x) * self.scale


def get_inputs():
    return [torch.randn(batch_size, features)]


def get_init_inputs():
    return [features]


KERNELPROOF = {
    "variants": {"small": {"batch_size": 8, "features": 64}, "odd": {"batch_size": 3, "features": 37}},
    "timed": ["default"],
    "cpu": ["small", "odd"],
    "flops": "2 * batch_size * features",
}
