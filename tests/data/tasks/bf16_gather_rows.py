"""A mixed task: bf16 activations and int64 row indices (an embedding-style gather), scaled by
an fp32 weight; no KERNELPROOF dict. Each slot keeps its dtype: bf16 rows, int64 indices."""

import torch

ROWS, DIM, PICKS = 64, 32, 16


class Model(torch.nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.scale = torch.nn.Parameter(torch.randn(dim))

    def forward(self, table, index):
        return table[index] * self.scale.to(table.dtype)


def get_inputs():
    return [torch.randn(ROWS, DIM, dtype=torch.bfloat16), torch.randint(0, ROWS, (PICKS,))]


def get_init_inputs():
    return [DIM]
