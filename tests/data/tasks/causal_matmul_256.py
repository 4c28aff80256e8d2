"""A 256 x 256 causal matmul, C = tril(A @ B), as a KernelBench file states it (no KERNELPROOF
block: on the CPU it runs at its one, published size). Its Triton solution
(tests/data/solutions/causal_matmul_256_triton.py) loops over K with tl.dot: a typical interpreted
kernel, seconds a case in Triton's interpreter."""

import torch
import torch.nn as nn

N = 256


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return torch.tril(torch.matmul(A, B))


def get_inputs():
    return [torch.randn(N, N), torch.randn(N, N)]


def get_init_inputs():
    return []
