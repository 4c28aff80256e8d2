import torch
import torch.nn as nn

n = 64


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.drop = nn.Dropout(0.5)

    def forward(self, x):
        return self.drop(x) * 2


def get_inputs():
    return [torch.randn(8, n)]


def get_init_inputs():
    return []


class ModelNew(Model):
    """The identity solution: the task's own Model, as KernelBench's sweep pairs it."""
