"""A tiny fusion for the test suite: y = relu(x) * scale + bias over rows of features."""

import torch
import torch.nn as nn

batch_size = 64
features = 96


class Model(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.scale = nn.Parameter(torch.randn(features))
        self.bias = nn.Parameter(torch.randn(features))

    def forward(self, x):
        return torch.relu(x) * self.scale + self.bias


def get_inputs():
    return [torch.rand(batch_size, features)]


def get_init_inputs():
    return [features]


KERNELPROOF = {
    "variants": {"small": {"batch_size": 8, "features": 32}, "odd": {"batch_size": 7, "features": 33}},
    "cpu": ["small", "odd"],
    "flops": "3 * batch_size * features",
}
