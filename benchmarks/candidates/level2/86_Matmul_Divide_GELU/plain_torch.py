"""level2/86_Matmul_Divide_GELU.py: Linear + divide + GELU in plain PyTorch, no kernel of its own.

Expected: a pass flagged plain_torch on the CPU; on a GPU the task's strict policy (KernelBench
tasks carry no KERNELPROOF dict) refuses it as no_custom_kernel: no GPU time in its own kernels.
"""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, input_size, output_size, divisor):
        super().__init__()
        self.linear = nn.Linear(input_size, output_size)
        self.divisor = divisor

    def forward(self, x):
        return torch.nn.functional.gelu(self.linear(x) / self.divisor)
