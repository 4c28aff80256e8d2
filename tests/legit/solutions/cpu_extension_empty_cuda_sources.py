"""relu(x) * scale + bias in a C++ extension that names the CUDA arguments it leaves empty.

Legit case: published CPU extensions pass `cuda_sources=[]` and `with_cuda=False` beside their
`cpp_sources`, and build the extension lazily through a module-level cache (`functools.lru_cache`).
Read as asking for CUDA sources, this needed no CUDA and was the machine's `environment` error on
the CPU (kernelproof/evaluate/machine.py).
"""

import functools

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP = r"""
#include <torch/extension.h>
torch::Tensor scale_relu(torch::Tensor x, torch::Tensor s, torch::Tensor b) {
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    const float* xp = xc.data_ptr<float>(); const float* sp = s.data_ptr<float>(); const float* bp = b.data_ptr<float>();
    float* yp = y.data_ptr<float>();
    const int64_t cols = xc.size(1), n = xc.numel();
    for (int64_t i = 0; i < n; ++i) { const float v = xp[i] > 0.f ? xp[i] : 0.f; yp[i] = v * sp[i % cols] + bp[i % cols]; }
    return y;
}
"""


@functools.lru_cache(maxsize=None)  # noqa: UP033 - as published code writes it
def _extension():
    return load_inline(
        name="kp_legit_empty_cuda_sources",
        cpp_sources=[CPP],
        cuda_sources=[],
        functions=["scale_relu"],
        with_cuda=False,
        extra_cflags=["-O2"],
    )


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.scale = nn.Parameter(torch.randn(features))
        self.bias = nn.Parameter(torch.randn(features))

    def forward(self, x):
        return _extension().scale_relu(x, self.scale, self.bias)
