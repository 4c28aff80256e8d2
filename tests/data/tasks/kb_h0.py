"""KernelBench-shaped: an initial state kept as a plain attribute, drawn in the constructor."""

import torch
import torch.nn as nn

batch_size = 8
n = 16


class Model(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.linear = nn.Linear(n, n)
        self.h0 = torch.randn(batch_size, n)

    def forward(self, x):
        return torch.tanh(self.linear(x) + self.h0.to(x.device))


def get_inputs():
    return [torch.randn(batch_size, n)]


def get_init_inputs():
    return [n]
