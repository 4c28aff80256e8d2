"""level2/70_Gemm_Sigmoid_Scaling_ResidualAdd.py: Linear + sigmoid * scale + the linear's output in plain PyTorch, no kernel of its own.

Expected: a pass flagged plain_torch on the CPU; on a GPU the task's strict policy (KernelBench
tasks carry no KERNELPROOF dict) refuses it as no_custom_kernel: no GPU time in its own kernels.
"""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, input_size, hidden_size, scaling_factor):
        super().__init__()
        self.gemm = nn.Linear(input_size, hidden_size)
        self.scaling_factor = scaling_factor

    def forward(self, x):
        y = self.gemm(x)
        return y + torch.sigmoid(y) * self.scaling_factor
