"""Sum over one dimension, kept: an honest CUDA kernel (load_inline) for KernelBench level1/47_Sum_reduction_over_a_dimension.py.

Measured: not yet measured on a GPU (no verdict, no speedup against eager or torch.compile).
CPU: its kernels compile with nvcc 13 for sm_90 (benchmarks/candidate_set.py --nvcc); nothing
CUDA runs without a GPU.
"""

import torch.nn as nn
from torch.utils import cpp_extension

KERNEL = r"""
// x viewed as (outer, R, inner): one thread per output element, reading down R (coalesced over inner)
__global__ void sum_dim_kernel(const float* __restrict__ x, float* __restrict__ y, long long outer, long long R,
                            long long inner) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= outer * inner) return;
    const long long o = i / inner, c = i % inner;
    const float* p = x + o * R * inner + c;
    float acc = 0.f;
    for (long long r = 0; r < R; ++r) acc += p[r * inner];
    y[i] = acc;
}
"""

LAUNCH = r"""
torch::Tensor sum_dim_forward(torch::Tensor x, int64_t dim) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "a float32 CUDA tensor is expected");
    auto xc = x.contiguous();
    dim = dim < 0 ? dim + xc.dim() : dim;
    long long outer = 1, inner = 1;
    for (int64_t d = 0; d < dim; ++d) outer *= xc.size(d);
    for (int64_t d = dim + 1; d < xc.dim(); ++d) inner *= xc.size(d);
    const long long R = xc.size(dim);
    auto shape = xc.sizes().vec();
    shape[dim] = 1;
    auto y = torch::empty(shape, xc.options());
    const int threads = 256;
    const long long blocks = (outer * inner + threads - 1) / threads;
    sum_dim_kernel<<<(unsigned)blocks, threads>>>(
        xc.data_ptr<float>(), y.data_ptr<float>(), outer, R, inner);
    TORCH_CHECK(cudaGetLastError() == cudaSuccess, "kernel launch failed");
    return y;
}
"""

_ext = cpp_extension.load_inline(
    name="kpc_sum_dim_honest_cuda",
    cpp_sources="torch::Tensor sum_dim_forward(torch::Tensor x, int64_t dim);",
    cuda_sources="#include <torch/extension.h>\n" + KERNEL + LAUNCH,
    functions=["sum_dim_forward"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return _ext.sum_dim_forward(x, self.dim)
