"""relu(x) * scale + bias in a CUDA extension built lazily: load_inline from __init__, inside a try.

Legit case (GPU): the pattern of published LLM-written CUDA kernels that kernelproof refused as
`forbidden_construct` (8 of 25 sampled from CUDA-L1's release): the extension is built when the
model is made, not at import, and the build sits in a try. The worker cannot build (its extensions
folder is read-only): the call becomes a build request that the parent checks and the builder pool
compiles with nvcc (kernelproof/build/runtime_request.py, docs/builds.md), and the worker loads the result.
A failed build is not swallowed into a fallback: the model has no other way to compute.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>

__global__ void lazy_scale_relu_kernel(const float* __restrict__ x, const float* __restrict__ s,
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
    lazy_scale_relu_kernel<<<blocks, threads>>>(xc.data_ptr<float>(), s.data_ptr<float>(), b.data_ptr<float>(),
                                                y.data_ptr<float>(), n, (int)xc.size(1));
    return y;
}
"""

CPP = "torch::Tensor scale_relu(torch::Tensor x, torch::Tensor s, torch::Tensor b);"


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.scale = nn.Parameter(torch.randn(features))
        self.bias = nn.Parameter(torch.randn(features))
        try:
            self.ext = load_inline(
                name="kp_lazy_cuda_scale_relu",
                cpp_sources=CPP,
                cuda_sources=CUDA,
                functions=["scale_relu"],
                extra_cuda_cflags=["-O3", "--use_fast_math"],
                verbose=False,
            )
        except Exception as exc:
            raise RuntimeError(f"could not build the CUDA extension: {exc}") from exc

    def forward(self, x):
        return self.ext.scale_relu(x, self.scale, self.bias)
