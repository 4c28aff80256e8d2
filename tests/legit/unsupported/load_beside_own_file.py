"""A C++ source written beside the solution's own file (os.path.dirname(__file__)) and built with load.

Unsupported, said plainly: kernelproof runs a copy of the solution's file, in the builder and in the
worker, from a folder the solution may read and never write. The build fails with the solution's
PermissionError, and the message says why and where to write instead (tempfile.gettempdir(), as
tests/legit/solutions/load_in_init_from_tmp.py does).
"""

import os

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load

SOURCE = r"""
#include <torch/extension.h>
torch::Tensor scale_relu(torch::Tensor x, torch::Tensor s, torch::Tensor b) {
    return torch::relu(x) * s + b;
}
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("scale_relu", &scale_relu); }
"""

PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "scale_relu_beside.cpp")
with open(PATH, "w") as f:
    f.write(SOURCE)
_ext = load(name="kp_unsupported_beside", sources=[PATH])


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.scale = nn.Parameter(torch.randn(features))
        self.bias = nn.Parameter(torch.randn(features))

    def forward(self, x):
        return _ext.scale_relu(x, self.scale, self.bias)
