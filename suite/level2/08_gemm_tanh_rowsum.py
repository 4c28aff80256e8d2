"""Linear layer, tanh, then a sum over the features: y = sum_j tanh(x W^T + b)_j, in fp32.

The tanh sits between the GEMM and the sum so that the sum cannot be folded into the weights
(sum_j (x W^T)_j = x . sum_j W_j would turn the task into a GEMV), and its zero mean keeps the row
sums spread out rather than near-constant. 4096 x 2048 -> 8192 is 137 GFLOP: about 2.7 ms for
eager cuBLAS SGEMM on an H200. library-ok: the GEMM may stay in cuBLAS with tanh and the row sum
fused into one kernel.
"""

import torch
import torch.nn as nn

batch_size = 4096
in_features = 2048
hidden = 8192


class Model(nn.Module):
    def __init__(self, in_features, hidden):
        super().__init__()
        self.linear = nn.Linear(in_features, hidden)

    def forward(self, x):
        return torch.tanh(self.linear(x)).sum(dim=1, keepdim=True)


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, hidden]


KERNELPROOF = {
    "variants": {
        "small": {"batch_size": 32, "in_features": 64, "hidden": 48},
        "odd": {"batch_size": 33, "in_features": 65, "hidden": 31},
    },
    "cpu": ["small", "odd"],
    "timed": ["default"],
    "precision": "fp32",
    "domains": ["any"],
    "flops": "2 * batch_size * in_features * hidden + 3 * batch_size * hidden",
    "policy": "library-ok",
}
