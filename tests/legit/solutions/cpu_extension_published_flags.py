"""relu(x) * scale + bias in an OpenMP C++ extension built with the flags published CPU kernels pass.

Legit case: gcc's vectorising and floating-point switches (`-ftree-vectorize`, `-ffast-math`,
`-funroll-all-loops`), `-pthread`, and `extra_include_paths=cpp_extension.include_paths()` (torch's
own headers, already on the command line) change only the code built; none reads or writes a file
(docs/builds.md, "What a solution may pass to the compilers"). They were refused as unknown flags.
"""

import torch
import torch.nn as nn
from torch.utils import cpp_extension

CPP = r"""
#include <torch/extension.h>
#include <omp.h>

torch::Tensor scale_relu(torch::Tensor x, torch::Tensor s, torch::Tensor b) {
    TORCH_CHECK(x.dim() == 2, "x must be 2-D");
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    const float* __restrict__ xp = xc.data_ptr<float>();
    const float* __restrict__ sp = s.data_ptr<float>();
    const float* __restrict__ bp = b.data_ptr<float>();
    float* __restrict__ yp = y.data_ptr<float>();
    const int64_t rows = xc.size(0), cols = xc.size(1);
    #pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
        #pragma omp simd
        for (int64_t c = 0; c < cols; ++c) {
            const float v = xp[r * cols + c];
            yp[r * cols + c] = (v > 0.f ? v : 0.f) * sp[c] + bp[c];
        }
    }
    return y;
}
"""

_ext = cpp_extension.load_inline(
    name="kp_legit_published_flags",
    cpp_sources=CPP,
    functions=["scale_relu"],
    extra_cflags=[
        "-O3",
        "-march=native",
        "-ffast-math",
        "-ftree-vectorize",
        "-funroll-all-loops",
        "-fopenmp",
        "-pthread",
    ],
    extra_ldflags=["-fopenmp", "-pthread"],
    extra_include_paths=cpp_extension.include_paths(),
    verbose=True,
)


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.scale = nn.Parameter(torch.randn(features))
        self.bias = nn.Parameter(torch.randn(features))

    def forward(self, x):
        return _ext.scale_relu(x, self.scale, self.bias)
