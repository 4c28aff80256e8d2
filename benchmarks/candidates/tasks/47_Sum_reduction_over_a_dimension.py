"""KernelBench level1/47_Sum_reduction_over_a_dimension.py's operator at its published sizes, with
CPU shapes for the smoke set.

The same Model, inputs and constants as the KernelBench task (benchmarks/candidate_set.py runs the
candidates written for it against this file in CI, where no KernelBench checkout exists); the
KERNELPROOF dict adds the shapes a CPU run uses.
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sum(x, dim=self.dim, keepdim=True)


batch_size = 128
dim1 = 4096
dim2 = 4095
reduce_dim = 1


def get_inputs():
    x = torch.rand(batch_size, dim1, dim2)
    return [x]


def get_init_inputs():
    return [reduce_dim]


KERNELPROOF = {"variants": {"cpu": {"batch_size": 4, "dim1": 37, "dim2": 301}}, "cpu": ["cpu"]}
