"""Mean squared error: an honest CUDA kernel (load_inline) for KernelBench level1/94_MSELoss.py.

Measured: not yet measured on a GPU (no verdict, no speedup against eager or torch.compile).
CPU: its kernels compile with nvcc 13 for sm_90 (benchmarks/candidate_set.py --nvcc); nothing
CUDA runs without a GPU.
"""

import torch.nn as nn
from torch.utils import cpp_extension

KERNEL = r"""
__device__ float block_sum(float v, float* shared) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffff, v, o);
    if (lane == 0) shared[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = (lane < (int)(blockDim.x >> 5)) ? shared[lane] : 0.f;
        for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffff, v, o);
    }
    return v;  // valid in thread 0
}

__global__ void mse_partial_kernel(const float* __restrict__ p, const float* __restrict__ t,
                                    float* __restrict__ partial, long long n) {
    __shared__ float shared[32];
    float acc = 0.f;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        const float d = p[i] - t[i];
        acc = fmaf(d, d, acc);
    }
    acc = block_sum(acc, shared);
    if (threadIdx.x == 0) partial[blockIdx.x] = acc;
}

__global__ void mse_final_kernel(const float* __restrict__ partial, float* __restrict__ out, int parts, long long n) {
    __shared__ float shared[32];
    float acc = 0.f;
    for (int i = threadIdx.x; i < parts; i += blockDim.x) acc += partial[i];
    acc = block_sum(acc, shared);
    if (threadIdx.x == 0) out[0] = (float)((double)acc / (double)n);
}
"""

LAUNCH = r"""
torch::Tensor mse_forward(torch::Tensor predictions, torch::Tensor targets) {
    TORCH_CHECK(predictions.is_cuda() && predictions.scalar_type() == torch::kFloat32, "float32 CUDA tensors");
    auto p = predictions.contiguous();
    auto t = targets.contiguous();
    const long long n = p.numel();
    const int parts = 132 * 16;
    auto partial = torch::empty({parts}, p.options());
    auto out = torch::empty({}, p.options());
    mse_partial_kernel<<<parts, 512>>>(p.data_ptr<float>(), t.data_ptr<float>(), partial.data_ptr<float>(), n);
    TORCH_CHECK(cudaGetLastError() == cudaSuccess, "kernel launch failed");
    mse_final_kernel<<<1, 1024>>>(partial.data_ptr<float>(), out.data_ptr<float>(), parts, n);
    TORCH_CHECK(cudaGetLastError() == cudaSuccess, "kernel launch failed");
    return out;
}
"""

_ext = cpp_extension.load_inline(
    name="kpc_mse_honest_cuda",
    cpp_sources="torch::Tensor mse_forward(torch::Tensor predictions, torch::Tensor targets);",
    cuda_sources="#include <torch/extension.h>\n" + KERNEL + LAUNCH,
    functions=["mse_forward"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, predictions, targets):
        return _ext.mse_forward(predictions, targets)
