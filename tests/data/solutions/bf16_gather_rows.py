"""The mixed task's gather, computed in fp32 and rounded to bf16 once."""

import torch


class ModelNew(torch.nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.scale = torch.nn.Parameter(torch.randn(dim))

    def forward(self, table, index):
        assert table.dtype == torch.bfloat16 and index.dtype == torch.int64
        return (table[index].float() * self.scale.to(table.dtype).float()).to(table.dtype)
