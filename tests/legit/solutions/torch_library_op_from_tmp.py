"""relu(x) * scale + bias as a custom operator: C++ written to the temporary folder, built with
cpp_extension.load at import (is_python_module=False), registered with TORCH_LIBRARY and called
through torch.ops.

Legit case: PyTorch's own custom-operator tutorial. The library loads through
torch.ops.load_library, never as a Python module; `load` of files the solution wrote builds as
load_inline of their text (kernelproof/build/inline.py).
"""

import os
import tempfile

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load

SOURCE = r"""
#include <torch/extension.h>

torch::Tensor scale_relu(const torch::Tensor& x, const torch::Tensor& s, const torch::Tensor& b) {
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

TORCH_LIBRARY(kp_legit_ops, m) {
    m.def("scale_relu(Tensor x, Tensor s, Tensor b) -> Tensor");
}

TORCH_LIBRARY_IMPL(kp_legit_ops, CPU, m) {
    m.impl("scale_relu", &scale_relu);
}
"""

PATH = os.path.join(tempfile.gettempdir(), "kp_legit_scale_relu_op.cpp")
with open(PATH, "w") as f:
    f.write(SOURCE)
load(name="kp_legit_scale_relu_op", sources=[PATH], is_python_module=False, extra_cflags=["-O2"])
os.remove(PATH)


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.scale = nn.Parameter(torch.randn(features))
        self.bias = nn.Parameter(torch.randn(features))

    def forward(self, x):
        return torch.ops.kp_legit_ops.scale_relu(x, self.scale, self.bias)
