"""level1/94_MSELoss.py: Mean squared error in plain PyTorch, no kernel of its own.

Expected: a pass flagged plain_torch on the CPU; on a GPU the task's strict policy (KernelBench
tasks carry no KERNELPROOF dict) refuses it as no_custom_kernel: no GPU time in its own kernels.
"""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, predictions, targets):
        return torch.mean((predictions - targets) ** 2)
