"""level1/88_MinGPTNewGelu.py: GELU, tanh approximation (minGPT), a CUDA kernel that does not compile.

The bug: a parameter was renamed (y_out) and the body still uses
y: nvcc stops with 'identifier "y" is undefined'.
Expected on a GPU: compile_error, the compiler's first error line in the message. On the CPU
with torch built without CUDA nothing is built (environment); benchmarks/candidate_set.py --nvcc
shows the nvcc error.
"""

import torch.nn as nn
from torch.utils import cpp_extension

KERNEL = r"""
__global__ void new_gelu_kernel(const float* __restrict__ x, float* __restrict__ y_out, long long n) {
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
    name="kpc_new_gelu_nocompile_cuda",
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
