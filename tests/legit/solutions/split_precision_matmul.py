"""An fp32 matmul through tensor cores at fp32 accuracy: 3xTF32 (tl.dot input_precision="tf32x3").

Legit case: each operand is split into a TF32 high part and a TF32 remainder, and three TF32
products (hi*hi + hi*lo + lo*hi) recover fp32 accuracy at tensor-core speed. The task's fp32
contract allows it (split_precision defaults to True); a plain TF32 dot would be
precision_downgrade (tests/exploits/solutions/a9_tf32_dot.py). On the CPU, Triton's interpreter
computes every dot in full fp32, so there this is an ordinary fp32 matmul; the real check runs
on a GPU.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK = 32


@triton.jit
def _matmul_3xtf32_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        rk = k0 + tl.arange(0, BK)
        a = tl.load(
            a_ptr + rm[:, None] * K + rk[None, :], mask=(rm[:, None] < M) & (rk[None, :] < K), other=0.0
        )
        b = tl.load(
            b_ptr + rk[:, None] * N + rn[None, :], mask=(rk[:, None] < K) & (rn[None, :] < N), other=0.0
        )
        acc += tl.dot(a, b, input_precision="tf32x3")
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        A = A.contiguous()
        B = B.contiguous()
        M, K = A.shape
        N = B.shape[1]
        C = torch.empty((M, N), device=A.device, dtype=torch.float32)
        grid = (triton.cdiv(M, BLOCK), triton.cdiv(N, BLOCK))
        _matmul_3xtf32_kernel[grid](A, B, C, M, N, K, BM=BLOCK, BN=BLOCK, BK=BLOCK)
        return C
