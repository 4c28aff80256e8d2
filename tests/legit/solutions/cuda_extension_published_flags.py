"""relu(x) * scale + bias in a CUDA extension built with the flags published CUDA kernels pass.

Legit case (GPU): `--restrict`, `--extra-device-vectorization`, `-Xcompiler -pthread`, `-lineinfo`
and `extra_include_paths=cpp_extension.include_paths()` change only the code built
(docs/builds.md, "What a solution may pass to the compilers"); they were refused as unknown flags.
"""

import torch
import torch.nn as nn
from torch.utils import cpp_extension

CUDA = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>

__global__ void scale_relu_kernel(const float* __restrict__ x, const float* __restrict__ s,
                                  const float* __restrict__ b, float* __restrict__ y, long long n, int cols) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        const float v = x[i];
        const int c = (int)(i % cols);
        y[i] = (v > 0.f ? v : 0.f) * s[c] + b[c];
    }
}

torch::Tensor scale_relu(torch::Tensor x, torch::Tensor s, torch::Tensor b) {
    TORCH_CHECK(x.is_cuda(), "x must be a CUDA tensor");
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    const long long n = xc.numel();
    const int threads = 256;
    const int blocks = (int)((n + threads - 1) / threads);
    scale_relu_kernel<<<blocks, threads>>>(xc.data_ptr<float>(), s.data_ptr<float>(), b.data_ptr<float>(),
                                           y.data_ptr<float>(), n, (int)xc.size(1));
    return y;
}
"""

CPP = "torch::Tensor scale_relu(torch::Tensor x, torch::Tensor s, torch::Tensor b);"

_ext = cpp_extension.load_inline(
    name="kp_legit_cuda_published_flags",
    cpp_sources=CPP,
    cuda_sources=CUDA,
    functions=["scale_relu"],
    extra_cflags=["-O3", "-pthread"],
    extra_cuda_cflags=[
        "-O3",
        "--use_fast_math",
        "--restrict",
        "--extra-device-vectorization",
        "-lineinfo",
        "-Xcompiler",
        "-pthread",
    ],
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
