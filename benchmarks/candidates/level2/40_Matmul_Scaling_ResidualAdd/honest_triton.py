"""Linear, scaled, plus itself: an honest Triton kernel for KernelBench level2/40_Matmul_Scaling_ResidualAdd.py.

How: a tiled GEMM with the epilogue fused into its store; fp32 through 3xTF32 (split precision).

Measured (NVIDIA H100 80GB HBM3, torch 2.11.0+cu130, Triton 3.6.0; kernelproof source d7252889ceaa,
2026-12-07, alone on the device): pass, 4 of 4 cases; 1.44x eager (95 % CI 1.44-1.45); 1.39x compile
(95 % CI 1.36-1.39); the kernel 7.919 ms at the 'default' shape (median, cold, 5 interleaved
rounds).
CPU (Triton's interpreter, correctness only, at the task's cpu_sizes in manifest.json): pass, 16 of
16 cases, 2026-12-06.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

BM, BN, BK = 64, 64, 32


@triton.jit
def _mm_scale_residual_kernel(
    x_ptr, w_ptr, b_ptr, y_ptr, M, N, K, scale, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr
):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        rk = k0 + tl.arange(0, BK)
        a = tl.load(
            x_ptr + rm[:, None] * K + rk[None, :], mask=(rm[:, None] < M) & (rk[None, :] < K), other=0.0
        )
        # W is (N, K): read a (BK, BN) tile of its transpose
        b = tl.load(
            w_ptr + rn[None, :] * K + rk[:, None], mask=(rn[None, :] < N) & (rk[:, None] < K), other=0.0
        )
        acc += tl.dot(a, b, input_precision="tf32x3")
    bias = tl.load(b_ptr + rn, mask=rn < N, other=0.0)
    v = acc + bias[None, :]
    y = v * scale + v
    out = (rm[:, None] < M) & (rn[None, :] < N)
    tl.store(y_ptr + rm[:, None] * N + rn[None, :], y, mask=out)


def _launch(x, weight, bias, scale):
    x = x.contiguous()
    M, K = x.shape
    N = weight.shape[0]
    y = torch.empty((M, N), device=x.device, dtype=x.dtype)
    grid = (triton.cdiv(M, BM), triton.cdiv(N, BN))
    _mm_scale_residual_kernel[grid](x, weight, bias, y, M, N, K, scale, BM=BM, BN=BN, BK=BK)
    return y


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, scaling_factor):
        super().__init__()
        self.matmul = nn.Linear(in_features, out_features)
        self.scaling_factor = scaling_factor

    def forward(self, x):
        return _launch(x, self.matmul.weight, self.matmul.bias, self.scaling_factor)
