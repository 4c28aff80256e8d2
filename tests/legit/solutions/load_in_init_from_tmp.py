"""relu(x) * scale + bias in a C++ extension whose source the solution writes to /tmp and builds with
cpp_extension.load from __init__ (a Python module with its own PYBIND11_MODULE).

Legit case: published solutions write their sources to the temporary folder and call `load` lazily.
The worker's /tmp is its own scratch folder; the build request names the file, and the parent reads
it there itself, following no link (kernelproof/build/sources.py), and has the builder pool build it.
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


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.scale = nn.Parameter(torch.randn(features))
        self.bias = nn.Parameter(torch.randn(features))
        os.makedirs("/tmp/kp_ext_src", exist_ok=True)
        path = "/tmp/kp_ext_src/scale_relu_init.cpp"
        with open(path, "w") as f:
            f.write(SOURCE)
        self.ext = load(name="kp_legit_scale_relu_init", sources=[path], extra_cflags=["-O2"])

    def forward(self, x):
        return self.ext.scale_relu(x, self.scale, self.bias)
