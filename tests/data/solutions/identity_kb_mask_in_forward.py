"""KernelBench-shaped: a mask made inside forward with no dtype (the default, float32).

The float64 oracle must make that mask in float64 too, or the matmul fails on mixed dtypes.
"""

import torch
import torch.nn as nn

batch_size = 4
n = 16


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        mask = torch.tril(torch.ones(x.shape[-1], x.shape[-1], device=x.device))
        return torch.matmul(x, mask) * torch.tensor(0.5, device=x.device)


def get_inputs():
    return [torch.randn(batch_size, n, n)]


def get_init_inputs():
    return []


class ModelNew(Model):
    """The identity solution: the task's own Model, as KernelBench's sweep pairs it."""
