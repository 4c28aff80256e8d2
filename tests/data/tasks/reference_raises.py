import torch
import torch.nn as nn

n = 16


class Model(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.w = nn.Parameter(torch.randn(n, n + 1))

    def forward(self, x):
        return x @ self.w @ self.w  # (n, n+1) @ (n, n+1): the reference itself is broken


def get_inputs():
    return [torch.randn(4, n)]


def get_init_inputs():
    return [n]
