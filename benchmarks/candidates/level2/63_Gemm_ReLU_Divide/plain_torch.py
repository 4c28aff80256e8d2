"""level2/63_Gemm_ReLU_Divide.py: Linear + ReLU + divide in plain PyTorch, no kernel of its own.

Expected: a pass flagged plain_torch on the CPU; on a GPU the task's strict policy (KernelBench
tasks carry no KERNELPROOF dict) refuses it as no_custom_kernel: no GPU time in its own kernels.
"""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, divisor):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.divisor = divisor

    def forward(self, x):
        return torch.relu(self.linear(x)) / self.divisor
