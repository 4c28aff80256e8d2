"""Mean squared error reduced to a scalar, in fp32: KernelBench level1 "MSELoss" as written there.

A legit-zoo task: KernelBench's loss tasks (MSE, Huber, hinge, cross-entropy with the default
reduction, KL divergence, triplet margin) all return a single scalar. An honest kernel for them
must be scoreable. Inputs are drawn from randn, so the task is not the closed-form fixture of
tests/exploits/tasks/mse_loss.py.
"""

import torch
import torch.nn as nn

batch_size = 128
dim = 128


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, predictions, targets):
        return torch.mean((predictions - targets) ** 2)


def get_inputs():
    return [torch.randn(batch_size, dim), torch.randn(batch_size, dim)]


def get_init_inputs():
    return []


KERNELPROOF = {
    "variants": {"small": {"batch_size": 8, "dim": 64}, "odd": {"batch_size": 7, "dim": 33}},
    "cpu": ["small", "odd"],
    "precision": "fp32",
    "flops": "3 * batch_size * dim",
}
