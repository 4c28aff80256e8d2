"""Decoy beside tests/legit/solutions/torch_library_inline_op.py: the custom operator is built and
registered, but forward computes with PyTorch and never calls it. Counting torch.ops calls as
launches must not count an operator that is merely loaded: no_custom_kernel on the CPU.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP = r"""
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

TORCH_LIBRARY(kp_decoy_unused_ops, m) {
    m.def("scale_relu(Tensor x, Tensor s, Tensor b) -> Tensor");
}

TORCH_LIBRARY_IMPL(kp_decoy_unused_ops, CPU, m) {
    m.impl("scale_relu", &scale_relu);
}
"""

load_inline(name="kp_decoy_unused_ops", cpp_sources=CPP, is_python_module=False, extra_cflags=["-O2"])


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.scale = nn.Parameter(torch.randn(features))
        self.bias = nn.Parameter(torch.randn(features))

    def forward(self, x):
        return torch.relu(x) * self.scale + self.bias
