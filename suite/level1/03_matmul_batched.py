"""Batched matrix multiplication, C[b] = A[b] @ B[b], in fp32.

128 products of (512 x 1024) @ (1024 x 1024) are 137 GFLOP over 1.07 GB: about 2.7 ms of IEEE fp32
on an H200 (~51 TFLOP/s). Strict: the GEMMs are the whole task.
"""

import torch
import torch.nn as nn

batch_size = 128
M = 512
K = 1024
N = 1024


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return torch.bmm(A, B)


def get_inputs():
    return [torch.randn(batch_size, M, K), torch.randn(batch_size, K, N)]


def get_init_inputs():
    return []


KERNELPROOF = {
    "variants": {
        "small": {"batch_size": 2, "M": 32, "K": 48, "N": 64},
        "odd": {"batch_size": 3, "M": 33, "K": 65, "N": 17},
    },
    "cpu": ["small", "odd"],
    "timed": ["default"],
    "precision": "fp32",
    "domains": ["any", "any"],
    "flops": "2 * batch_size * M * N * K",
    "policy": "strict",
}
