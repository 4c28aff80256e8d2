"""Linear layer, exact GELU, then softmax over the output features, in fp32.

2048 x 8192 -> 4096 is 137 GFLOP: about 2.7 ms for eager cuBLAS SGEMM on an H200, then GELU and
softmax passes over 32 MB. library-ok: the GEMM may stay in cuBLAS with GELU and softmax fused into
one row kernel.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 2048
in_features = 8192
out_features = 4096


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        return torch.softmax(F.gelu(self.linear(x)), dim=1)


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]


KERNELPROOF = {
    "variants": {
        "small": {"batch_size": 32, "in_features": 64, "out_features": 48},
        "odd": {"batch_size": 33, "in_features": 65, "out_features": 31},
    },
    "cpu": ["small", "odd"],
    "timed": ["default"],
    "precision": "fp32",
    "domains": ["any"],
    "flops": "2 * batch_size * in_features * out_features + 6 * batch_size * out_features",
    "policy": "library-ok",
}
