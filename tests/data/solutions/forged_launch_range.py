"""tasks/scale_relu.py in plain PyTorch, inside a profiler range named as the harness names a launch.

On the CPU launch accounting excludes what runs inside a launch range; a range of that name that
the harness did not open is refused (forbidden_construct), whatever runs inside it.
"""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.scale = nn.Parameter(torch.randn(features))
        self.bias = nn.Parameter(torch.randn(features))

    def forward(self, x):
        with torch.profiler.record_function("kernelproof.launch:triton:scale_relu_kernel"):
            return torch.relu(x) * self.scale + self.bias
