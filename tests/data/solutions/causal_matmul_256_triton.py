"""C = tril(A @ B) in one Triton kernel: 32 x 32 tiles, a loop over K with tl.dot, the causal mask
applied in the epilogue. Honest: it must pass."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def causal_matmul_kernel(
    a_ptr, b_ptr, c_ptr, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr
):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        ks = k + offs_k
        a = tl.load(
            a_ptr + offs_m[:, None] * K + ks[None, :],
            mask=(offs_m[:, None] < M) & (ks[None, :] < K),
            other=0.0,
        )
        b = tl.load(
            b_ptr + ks[:, None] * N + offs_n[None, :],
            mask=(ks[:, None] < K) & (offs_n[None, :] < N),
            other=0.0,
        )
        acc = tl.dot(a, b, acc, input_precision="ieee")
    acc = tl.where(offs_n[None, :] <= offs_m[:, None], acc, 0.0)
    tl.store(
        c_ptr + offs_m[:, None] * N + offs_n[None, :], acc, mask=(offs_m[:, None] < M) & (offs_n[None, :] < N)
    )


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        A, B = A.contiguous(), B.contiguous()
        M, K = A.shape
        N = B.shape[1]
        C = torch.empty((M, N), device=A.device, dtype=torch.float32)
        grid = (triton.cdiv(M, 32), triton.cdiv(N, 32))
        causal_matmul_kernel[grid](A, B, C, M, N, K, BLOCK_M=32, BLOCK_N=32, BLOCK_K=32)
        return C
