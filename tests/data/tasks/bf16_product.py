"""A task written in bf16 (no KERNELPROOF dict): get_inputs() makes two bf16 tensors, Model
multiplies them. Judged in bf16 as written (kernelproof/verify/contract.py)."""

import torch

N = 4096


class Model(torch.nn.Module):
    def forward(self, a, b):
        return a * b


def get_inputs():
    return [torch.randn(N, dtype=torch.bfloat16), torch.randn(N, dtype=torch.bfloat16)]


def get_init_inputs():
    return []
