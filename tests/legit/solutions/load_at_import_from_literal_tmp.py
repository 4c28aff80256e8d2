"""relu(x) * scale + bias in a C++ extension whose source the solution writes to a literal /tmp path
at import and builds there with cpp_extension.load (a Python module with its own PYBIND11_MODULE).

Legit case: published solutions write their sources to "/tmp/..." at module level. The builder that
imports the solution first has a private /tmp of its own (its staging folder's tmp/, bound there as a
worker's is), so the import-time build happens there; the worker's import writes the same file to
its own /tmp and finds the build by its digest.
"""

import os

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load

SOURCE = r"""
#include <torch/extension.h>

torch::Tensor scale_relu(torch::Tensor x, torch::Tensor s, torch::Tensor b) {
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    const float* xp = xc.data_ptr<float>();
    const float* sp = s.data_ptr<float>();
    const float* bp = b.data_ptr<float>();
    float* yp = y.data_ptr<float>();
    const int64_t cols = xc.size(1), n = xc.numel();
    for (int64_t i = 0; i < n; ++i) {
        const float v = xp[i] > 0.f ? xp[i] : 0.f;
        yp[i] = v * sp[i % cols] + bp[i % cols];
    }
    return y;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("scale_relu", &scale_relu); }
"""


os.makedirs("/tmp/kp_ext_import", exist_ok=True)
PATH = "/tmp/kp_ext_import/scale_relu_import.cpp"
with open(PATH, "w") as f:
    f.write(SOURCE)
EXT = load(name="kp_legit_scale_relu_import", sources=[PATH], extra_cflags=["-O2"])


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.scale = nn.Parameter(torch.randn(features))
        self.bias = nn.Parameter(torch.randn(features))

    def forward(self, x):
        return EXT.scale_relu(x, self.scale, self.bias)
