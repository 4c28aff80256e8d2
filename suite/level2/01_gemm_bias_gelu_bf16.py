"""Linear layer (GEMM + bias) followed by exact GELU, in bf16.

The bf16 contract: the transformer-MLP case, where tensors are bf16 and accumulation is fp32.
8192 x 8192 x 8192 is 1.1 TFLOP: about 1.5 ms for eager cuBLAS on an H200 (~730 TFLOP/s bf16), plus
a GELU pass over 134 MB. library-ok: a solution may keep the GEMM in cuBLAS and write only the
epilogue, or fuse the epilogue into its own GEMM.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 8192
in_features = 8192
out_features = 8192


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        return F.gelu(self.linear(x))


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
    "precision": "bf16",
    "domains": ["any"],
    "flops": "2 * batch_size * in_features * out_features + 2 * batch_size * out_features",
    "policy": "library-ok",
}
