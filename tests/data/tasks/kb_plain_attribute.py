"""KernelBench-shaped: a tensor kept as a plain attribute (an RNN's h0), and a dict of them.

The float64 oracle converts parameters and buffers; these must be converted too, or the oracle
fails on "expected both operands to have the same dtype".
"""

import torch
import torch.nn as nn

batch_size = 16
n = 24


class Model(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.linear = nn.Linear(n, n)
        self.h0 = torch.randn(4, n)
        self.extras = {"bias": torch.randn(n)}

    def forward(self, x):
        h = self.h0.to(x.device)
        return (
            self.linear(x) + torch.matmul(x, h.t()).sum(-1, keepdim=True) + self.extras["bias"].to(x.device)
        )


def get_inputs():
    return [torch.randn(batch_size, n)]


def get_init_inputs():
    return [n]
