"""Division by the L2 norm of each row: an honest CUDA kernel (load_inline) for KernelBench level1/39_L2Norm_.py.

Measured: not yet measured on a GPU (no verdict, no speedup against eager or torch.compile).
CPU: its kernels compile with nvcc 13 for sm_90 (benchmarks/candidate_set.py --nvcc); nothing
CUDA runs without a GPU.
"""

import torch.nn as nn
from torch.utils import cpp_extension

KERNEL = r"""
// One block per row: a block-wide reduction in shared memory, then the row is rewritten.
__device__ float block_reduce(float v, float* shared, bool is_max) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    for (int o = 16; o > 0; o >>= 1) {
        const float w = __shfl_down_sync(0xffffffff, v, o);
        v = is_max ? fmaxf(v, w) : v + w;
    }
    if (lane == 0) shared[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = (lane < (int)(blockDim.x >> 5)) ? shared[lane] : (is_max ? -INFINITY : 0.f);
        for (int o = 16; o > 0; o >>= 1) {
            const float w = __shfl_down_sync(0xffffffff, v, o);
            v = is_max ? fmaxf(v, w) : v + w;
        }
        if (lane == 0) shared[0] = v;
    }
    __syncthreads();
    v = shared[0];
    __syncthreads();
    return v;
}

__global__ void l2_norm_kernel(const float* __restrict__ x, float* __restrict__ y, long long cols) {
    __shared__ float shared[32];
    const float* xr = x + (long long)blockIdx.x * cols;
    float* yr = y + (long long)blockIdx.x * cols;
    float s = 0.f;
    for (long long c = threadIdx.x; c < cols; c += blockDim.x) s += xr[c] * xr[c];
    s = block_reduce(s, shared, false);
    const float inv = 1.f / sqrtf(s);
    for (long long c = threadIdx.x; c < cols; c += blockDim.x) yr[c] = xr[c] * inv;
}
"""

LAUNCH = r"""
torch::Tensor l2_norm_forward(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32 && x.dim() == 2, "a 2-D float32 CUDA tensor");
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    const long long rows = xc.size(0), cols = xc.size(1);
    l2_norm_kernel<<<(unsigned)rows, 1024>>>(
        xc.data_ptr<float>(), y.data_ptr<float>(), cols);
    TORCH_CHECK(cudaGetLastError() == cudaSuccess, "kernel launch failed");
    return y;
}
"""

_ext = cpp_extension.load_inline(
    name="kpc_l2_norm_honest_cuda",
    cpp_sources="torch::Tensor l2_norm_forward(torch::Tensor x);",
    cuda_sources="#include <torch/extension.h>\n" + KERNEL + LAUNCH,
    functions=["l2_norm_forward"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return _ext.l2_norm_forward(x)
