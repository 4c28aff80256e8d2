"""Square matrix multiplication, C = A @ B, in fp32.

N = 4096 is 137 GFLOP: about 2.7 ms for eager cuBLAS SGEMM on an H200 (IEEE fp32, ~51 TFLOP/s),
compute-bound. Strict: the GEMM is the whole task, so it must be the solution's own kernel.
The odd variant (129) leaves a one-element fringe past any power-of-two tile.
"""

import torch
import torch.nn as nn

N = 4096


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return torch.matmul(A, B)


def get_inputs():
    return [torch.randn(N, N), torch.randn(N, N)]


def get_init_inputs():
    return []


KERNELPROOF = {
    "variants": {"small": {"N": 64}, "odd": {"N": 129}},
    "cpu": ["small", "odd"],
    "timed": ["default"],
    "precision": "fp32",
    "domains": ["any", "any"],
    "flops": "2 * N * N * N",
    "policy": "strict",
}
