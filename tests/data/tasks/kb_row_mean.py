"""KernelBench-shaped: one fixed shape, no variants. A row mean over 64 columns."""

import torch
import torch.nn as nn

batch_size = 8
cols = 64


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x.mean(dim=1)


def get_inputs():
    return [torch.randn(batch_size, cols)]


def get_init_inputs():
    return []
