"""KernelBench level1/23_Softmax.py's operator at its published sizes, with CPU shapes for the smoke set.

The same Model, inputs and constants as the KernelBench task (benchmarks/candidate_set.py runs the
candidates written for it against this file in CI, where no KernelBench checkout exists); the
KERNELPROOF dict adds the shapes a CPU run uses.
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=1)


batch_size = 4096
dim = 393216


def get_inputs():
    x = torch.rand(batch_size, dim)
    return [x]


def get_init_inputs():
    return []


KERNELPROOF = {"variants": {"cpu": {"batch_size": 6, "dim": 3000}}, "cpu": ["cpu"]}
