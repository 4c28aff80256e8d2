import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.offset = nn.Parameter(torch.randn(1) * 3)

    def forward(self, x):
        return torch.clamp(torch.tanh(x) / 2 - self.offset, min=-1, max=1)
