"""GELU, tanh approximation (minGPT): an honest CUDA kernel (load_inline) for KernelBench level1/88_MinGPTNewGelu.py.

Measured (NVIDIA H100 80GB HBM3, torch 2.11.0+cu130, Triton 3.6.0; kernelproof source d7252889ceaa,
2026-12-07, alone on the device): pass, 4 of 4 cases; 8.47x eager (95 % CI 8.41-8.47); 0.94x compile
(95 % CI 0.94-0.95); the kernel 0.1893 ms at the 'default' shape (median, cold, 5 interleaved
rounds).
CPU: its kernels compile with nvcc 13 for sm_90 (benchmarks/candidate_set.py --nvcc); nothing
CUDA runs without a GPU.
"""

import torch.nn as nn
from torch.utils import cpp_extension

KERNEL = r"""
__global__ void new_gelu_kernel(const float* __restrict__ x, float* __restrict__ y, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (; i < n; i += stride) {
        const float v = x[i];
        const float r = 0.5f * v * (1.f + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v)));
        y[i] = r;
    }
}
"""

LAUNCH = r"""
torch::Tensor new_gelu_forward(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "a float32 CUDA tensor is expected");
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    const long long n = xc.numel();
    const int threads = 256;
    const long long blocks = std::min<long long>((n + threads - 1) / threads, 132LL * 64);
    new_gelu_kernel<<<(unsigned)blocks, threads>>>(
        xc.data_ptr<float>(), y.data_ptr<float>(), n);
    TORCH_CHECK(cudaGetLastError() == cudaSuccess, "kernel launch failed");
    return y;
}
"""

_ext = cpp_extension.load_inline(
    name="kpc_new_gelu_honest_cuda",
    cpp_sources="torch::Tensor new_gelu_forward(torch::Tensor x);",
    cuda_sources="#include <torch/extension.h>\n" + KERNEL + LAUNCH,
    functions=["new_gelu_forward"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return _ext.new_gelu_forward(x)
