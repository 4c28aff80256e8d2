"""Decoy beside lazy_cpp_extension: the extension built in __init__ does not compile.

The build the worker asks for fails in the builder pool; the solution catches the error and falls
back to PyTorch, which does not save it: the failed build is its compile_error, with the
compiler's line.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP = r"""
#include <torch/extension.h>
torch::Tensor scale_relu(torch::Tensor x, torch::Tensor s, torch::Tensor b) {
    return (torch::relu(x) * s + b)  // a missing semicolon
}
"""


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.scale = nn.Parameter(torch.randn(features))
        self.bias = nn.Parameter(torch.randn(features))
        try:
            self.ext = load_inline(name="kp_lazy_broken", cpp_sources=CPP, functions=["scale_relu"])
        except Exception:
            self.ext = None

    def forward(self, x):
        if self.ext is None:
            return torch.relu(x) * self.scale + self.bias
        return self.ext.scale_relu(x, self.scale, self.bias)
