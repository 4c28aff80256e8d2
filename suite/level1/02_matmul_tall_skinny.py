"""Tall-skinny matrix multiplication, C = A @ B with A (M, K) tall and B (K, N) narrow, in fp32.

M = 131072, K = 1024, N = 256 is 69 GFLOP over 0.67 GB: still compute-bound on an H200 (about
1.4 ms of IEEE fp32 at ~51 TFLOP/s), but with only two 128-wide column tiles the work must be split
along M. Strict: the GEMM is the whole task.
"""

import torch
import torch.nn as nn

M = 131072
K = 1024
N = 256


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return torch.matmul(A, B)


def get_inputs():
    return [torch.randn(M, K), torch.randn(K, N)]


def get_init_inputs():
    return []


KERNELPROOF = {
    "variants": {"small": {"M": 256, "K": 64, "N": 32}, "odd": {"M": 257, "K": 33, "N": 7}},
    "cpu": ["small", "odd"],
    "timed": ["default"],
    "precision": "fp32",
    "domains": ["any", "any"],
    "flops": "2 * M * N * K",
    "policy": "strict",
}
