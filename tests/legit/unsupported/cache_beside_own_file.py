"""A plain-PyTorch solution that writes a small cache file beside its own file at import.

Unsupported, said plainly: the folder of the solution's file holds the copy kernelproof runs and is
read-only to it, so the write is refused (forbidden_construct) with a message that names the folder
and where to write instead.
"""

import json
import os

import torch
import torch.nn as nn

with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "tuning_cache.json"), "w") as f:
    json.dump({"block": 256}, f)


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.scale = nn.Parameter(torch.randn(features))
        self.bias = nn.Parameter(torch.randn(features))

    def forward(self, x):
        return torch.relu(x) * self.scale + self.bias
