"""KernelBench level2/76_Gemm_Add_ReLU.py's operator at its published sizes, with CPU shapes for the
smoke set.

The same Model, inputs and constants as the KernelBench task (benchmarks/candidate_set.py runs the
candidates written for it against this file in CI, where no KernelBench checkout exists); the
KERNELPROOF dict adds the shapes a CPU run uses.
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features, out_features, bias_shape):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features, bias=False)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        x = self.gemm(x)
        x = x + self.bias
        x = torch.relu(x)
        return x


batch_size = 1024
in_features = 8192
out_features = 8192
bias_shape = (out_features,)


def get_inputs():
    return [torch.rand(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, bias_shape]


KERNELPROOF = {
    "variants": {"cpu": {"batch_size": 24, "in_features": 80, "out_features": 72}},
    "cpu": ["cpu"],
}
