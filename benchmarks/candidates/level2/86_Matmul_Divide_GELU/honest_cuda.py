"""Linear + divide + GELU: an honest CUDA kernel (load_inline) for KernelBench level2/86_Matmul_Divide_GELU.py.

Measured (NVIDIA H100 80GB HBM3, torch 2.11.0+cu130, Triton 3.6.0; kernelproof source d7252889ceaa,
2026-12-07, alone on the device): pass, 4 of 4 cases; 0.23x eager (95 % CI 0.23-0.23); 0.23x compile
(95 % CI 0.23-0.23); the kernel 11.68 ms at the 'default' shape (median, cold, 5 interleaved
rounds).
CPU: its kernels compile with nvcc 13 for sm_90 (benchmarks/candidate_set.py --nvcc); nothing
CUDA runs without a GPU.
"""

import torch.nn as nn
from torch.utils import cpp_extension

KERNEL = r"""
// 32x32 output tiles, each thread computes 2x2 of them; fp32 FMAs over shared-memory tiles of x and W.
#define TILE 32
__global__ void mm_div_gelu_kernel(const float* __restrict__ x, const float* __restrict__ w,
                            const float* __restrict__ bias, float* __restrict__ y,
                            int M, int N, int K, float divisor) {
    __shared__ float xs[TILE][TILE + 1];
    __shared__ float ws[TILE][TILE + 1];
    const int tx = threadIdx.x, ty = threadIdx.y;  // 16 x 16 threads
    const int row0 = blockIdx.y * TILE, col0 = blockIdx.x * TILE;
    float acc[2][2] = {{0.f, 0.f}, {0.f, 0.f}};
    for (int k0 = 0; k0 < K; k0 += TILE) {
        for (int i = ty; i < TILE; i += 16)
            for (int j = tx; j < TILE; j += 16) {
                const int r = row0 + i, k = k0 + j, n = col0 + i;
                xs[i][j] = (r < M && k < K) ? x[(long long)r * K + k] : 0.f;
                ws[i][j] = (n < N && k < K) ? w[(long long)n * K + k] : 0.f;
            }
        __syncthreads();
        #pragma unroll 8
        for (int kk = 0; kk < TILE; ++kk)
            for (int a = 0; a < 2; ++a)
                for (int b = 0; b < 2; ++b)
                    acc[a][b] = fmaf(xs[ty + 16 * a][kk], ws[tx + 16 * b][kk], acc[a][b]);
        __syncthreads();
    }
    for (int a = 0; a < 2; ++a)
        for (int b = 0; b < 2; ++b) {
            const int r = row0 + ty + 16 * a, c = col0 + tx + 16 * b;
            if (r < M && c < N) {
                const float v = acc[a][b] + bias[c];
                const float u = v / divisor;
                const float o = 0.5f * u * (1.f + erff(u * 0.70710678118654752f));
                y[(long long)r * N + c] = o;
            }
        }
}
"""

LAUNCH = r"""
torch::Tensor mm_div_gelu_forward(torch::Tensor x, torch::Tensor w, torch::Tensor bias, double divisor) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "a float32 CUDA tensor is expected");
    auto xc = x.contiguous();
    auto wc = w.contiguous();
    auto bc = bias.contiguous();
    const int M = xc.size(0), K = xc.size(1), N = wc.size(0);
    auto y = torch::empty({M, N}, xc.options());
    dim3 threads(16, 16), blocks((N + TILE - 1) / TILE, (M + TILE - 1) / TILE);
    mm_div_gelu_kernel<<<blocks, threads>>>(
        xc.data_ptr<float>(), wc.data_ptr<float>(), bc.data_ptr<float>(), y.data_ptr<float>(), M, N, K, (float)divisor);
    TORCH_CHECK(cudaGetLastError() == cudaSuccess, "kernel launch failed");
    return y;
}
"""

_ext = cpp_extension.load_inline(
    name="kpc_mm_div_gelu_honest_cuda",
    cpp_sources="torch::Tensor mm_div_gelu_forward(torch::Tensor x, torch::Tensor w, torch::Tensor bias, double divisor);",
    cuda_sources="#include <torch/extension.h>\n" + KERNEL + LAUNCH,
    functions=["mm_div_gelu_forward"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self, input_size, output_size, divisor):
        super().__init__()
        self.linear = nn.Linear(input_size, output_size)
        self.divisor = divisor

    def forward(self, x):
        return _ext.mm_div_gelu_forward(x, self.linear.weight, self.linear.bias, self.divisor)
