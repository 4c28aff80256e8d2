"""tasks/scale_relu.py in plain PyTorch, raising only while a profiler records.

Launch accounting's profiled forward is a hidden call like any other: its failure is the
verdict's (runtime_error), so the solution cannot leave the count undecided by failing there.
"""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.scale = nn.Parameter(torch.randn(features))
        self.bias = nn.Parameter(torch.randn(features))

    def forward(self, x):
        if torch.autograd._profiler_enabled():
            raise RuntimeError("not while watched")
        return torch.relu(x) * self.scale + self.bias
