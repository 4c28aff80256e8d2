"""Linear layer, then LayerNorm over its output features, then exact GELU, in fp32.

4096 x 2048 -> 4096 is 69 GFLOP: about 1.4 ms for eager cuBLAS SGEMM on an H200, then a LayerNorm
and a GELU pass over 64 MB each. The LayerNorm's affine parameters are drawn away from 1/0 so a
kernel that drops them fails. library-ok: the GEMM may stay in cuBLAS with the normalisation and
activation fused into one row kernel.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 4096
in_features = 2048
out_features = 4096


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.norm = nn.LayerNorm(out_features)
        with torch.no_grad():
            self.norm.weight.uniform_(0.5, 1.5)
            self.norm.bias.uniform_(-0.5, 0.5)

    def forward(self, x):
        return F.gelu(self.norm(self.linear(x)))


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
    "flops": "2 * batch_size * in_features * out_features + 10 * batch_size * out_features",
    "policy": "library-ok",
}
