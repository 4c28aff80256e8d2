"""relu(x) * scale + bias in a C++ extension built lazily, in __init__ and inside a try, with OpenMP.

Legit case: published solutions call load_inline from __init__, from a function, inside a try or on
the first forward. The worker cannot build (its extensions folder is read-only): the call becomes a
build request the parent serves with the builder pool (kernelproof/build/runtime_request.py). `-fopenmp`
is an ordinary flag (docs/builds.md). A C++ extension with no CUDA sources runs on the CPU, so this
pair runs in CI.
"""

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
    int64_t cols = xc.size(1), n = xc.numel();
    #pragma omp parallel for
    for (int64_t i = 0; i < n; ++i) { float v = xp[i] > 0.f ? xp[i] : 0.f; yp[i] = v * sp[i % cols] + bp[i % cols]; }
    return y;
}
"""


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.scale = nn.Parameter(torch.randn(features))
        self.bias = nn.Parameter(torch.randn(features))
        try:
            self.ext = load_inline(
                name="kp_lazy_scale_relu",
                cpp_sources=CPP,
                functions=["scale_relu"],
                extra_cflags=["-O2", "-fopenmp"],
                extra_ldflags=["-fopenmp"],
            )
        except Exception as exc:
            raise RuntimeError(f"could not build: {exc}") from exc

    def forward(self, x):
        return self.ext.scale_relu(x, self.scale, self.bias)
