"""Decoy beside load_in_init_from_tmp: the source file `load` names has a second hard link.

The worker reads the file itself (it is its own), but the parent reads the files a load request
names again, in the worker's scratch folder, and only a regular file with one link: a link is how a
file from elsewhere would reach it (kernelproof/build/sources.py). The request is refused with the
path named; the solution catches the error and falls back to PyTorch, which does not save it: the
refused build is its compile_error.
"""

import os

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load

SOURCE = r"""
#include <torch/extension.h>
torch::Tensor scale_relu(torch::Tensor x, torch::Tensor s, torch::Tensor b) { return torch::relu(x) * s + b; }
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("scale_relu", &scale_relu); }
"""


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.scale = nn.Parameter(torch.randn(features))
        self.bias = nn.Parameter(torch.randn(features))
        os.makedirs("/tmp/kp_linked", exist_ok=True)
        first, second = "/tmp/kp_linked/first.cpp", "/tmp/kp_linked/scale_relu.cpp"
        with open(first, "w") as f:
            f.write(SOURCE)
        if not os.path.exists(second):
            os.link(first, second)
        try:
            self.ext = load(name="kp_decoy_linked", sources=[second])
        except RuntimeError:
            self.ext = None

    def forward(self, x):
        if self.ext is None:
            return torch.relu(x) * self.scale + self.bias
        return self.ext.scale_relu(x, self.scale, self.bias)
