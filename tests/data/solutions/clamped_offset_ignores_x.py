"""Never reads x: the bound the offset clamps every output to when it is large. Correct only under
weights that make the task degenerate (tests/data/tasks/clamped_offset.py)."""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.offset = nn.Parameter(torch.randn(1) * 3)

    def forward(self, x):
        return (-torch.sign(self.offset)).expand(x.shape).contiguous()
