"""The in-place affine map computed into a new tensor: x itself is never updated.

For a task that is in place by contract (tests/legit/tasks/scale_shift_inplace.py) the updated
input is a result: leaving it unchanged is wrong even though the returned tensor is right.
"""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.scale = nn.Parameter(torch.randn(features))
        self.shift = nn.Parameter(torch.randn(features))

    def forward(self, x):
        return x * self.scale + self.shift
