"""Square matrix multiplication: an honest Triton kernel for KernelBench level1/1_Square_matrix_multiplication_.py.

How: a tiled GEMM, fp32 through 3xTF32 (split precision).

Measured (NVIDIA H100 80GB HBM3, torch 2.11.0+cu130, Triton 3.6.0; kernelproof source d7252889ceaa,
2026-12-07, alone on the device): pass, 4 of 4 cases; 0.70x eager (95 % CI 0.70-0.71); 0.70x compile
(95 % CI 0.70-0.71); the kernel 3.76 ms at the 'default' shape (median, cold, 5 interleaved rounds).
CPU (Triton's interpreter, correctness only, at the task's cpu_sizes in manifest.json): pass, 16 of
16 cases, 2026-12-06.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

BM, BN, BK = 64, 64, 32


@triton.jit
def _square_mm_kernel(x_ptr, w_ptr, y_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
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
        b = tl.load(
            w_ptr + rk[:, None] * N + rn[None, :], mask=(rk[:, None] < K) & (rn[None, :] < N), other=0.0
        )
        acc += tl.dot(a, b, input_precision="tf32x3")
    v = acc
    y = v
    out = (rm[:, None] < M) & (rn[None, :] < N)
    tl.store(y_ptr + rm[:, None] * N + rn[None, :], y, mask=out)


def _launch(x, weight):
    x = x.contiguous()
    M, K = x.shape
    N = weight.shape[1]
    y = torch.empty((M, N), device=x.device, dtype=x.dtype)
    grid = (triton.cdiv(M, BM), triton.cdiv(N, BN))
    _square_mm_kernel[grid](x, weight.contiguous(), y, M, N, K, BM=BM, BN=BN, BK=BK)
    return y


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return _launch(A, B)
