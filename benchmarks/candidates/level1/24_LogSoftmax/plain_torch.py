"""level1/24_LogSoftmax.py: LogSoftmax over dim 1 in plain PyTorch, no kernel of its own.

Expected: a pass flagged plain_torch on the CPU; on a GPU the task's strict policy (KernelBench
tasks carry no KERNELPROOF dict) refuses it as no_custom_kernel: no GPU time in its own kernels.
"""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, dim: int = 1):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return torch.log_softmax(x, dim=self.dim)
