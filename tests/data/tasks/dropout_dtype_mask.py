"""Dropout whose mask depends on the dtype it is drawn in, as CUDA's fused dropout does: the float64
oracle under the same seed drops other elements than the float32 reference."""

import torch
import torch.nn as nn

n = 256


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        if not self.training:
            return torch.softmax(x, dim=1)
        keep = torch.rand(x.shape, dtype=x.dtype, device=x.device) > 0.2
        return torch.softmax(x * keep / 0.8, dim=1)


def get_inputs():
    return [torch.randn(8, n) * 0.01]


def get_init_inputs():
    return []
