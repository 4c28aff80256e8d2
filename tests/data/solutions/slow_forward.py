"""A correct solution that takes a second per call: fine for any one case, not for a short evaluation limit."""

import time

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.scale = nn.Parameter(torch.randn(features))
        self.bias = nn.Parameter(torch.randn(features))

    def forward(self, x):
        time.sleep(1.0)
        return torch.relu(x) * self.scale + self.bias
