"""A task no device holds: 2**32 rows of 96 floats, 1.6 TB a tensor.

Its verdict must be ``too_large`` from the meta device's sizes alone, in seconds, before any
full-size tensor exists (tests/verify/test_footprint.py; on a GPU, benchmarks/memory_trace.py times it).
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.scale = nn.Parameter(torch.randn(features))

    def forward(self, x):
        return torch.relu(x) * self.scale


batch_size = 2**32
features = 96


def get_inputs():
    return [torch.randn(batch_size, features)]


def get_init_inputs():
    return [features]
