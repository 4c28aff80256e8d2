"""Whether this task can tell right from wrong depends on its weights: y = clamp(tanh(x) / 2 - offset,
-1, 1) with the offset drawn by torch.randn. Where the offset is larger than 1.5 in size every
output is clamped to the same bound, and a kernel that ignores x is correct (KernelBench level 2's
task 58, ConvTranspose3d_LogSumExp_HardSwish_Subtract_Clamp, in small)."""

import torch
import torch.nn as nn

batch_size = 16
features = 64


class Model(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.offset = nn.Parameter(torch.randn(1) * 3)

    def forward(self, x):
        return torch.clamp(torch.tanh(x) / 2 - self.offset, min=-1, max=1)


def get_inputs():
    return [torch.randn(batch_size, features)]


def get_init_inputs():
    return [features]


KERNELPROOF = {"variants": {"small": {"batch_size": 8, "features": 32}}, "cpu": ["small"]}
