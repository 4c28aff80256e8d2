"""RMS normalization over the channel dimension of an NCHW tensor, with a per-channel gain, in fp32.

y = x / sqrt(mean(x^2 over C) + eps) * g. The reduction runs across the strided channel axis, and
eager PyTorch needs six kernels and several passes. 16 x 64 x 448 x 448 is 0.8 GB in and out:
about 1.3 ms eager on an H200, 0.4 ms at one read and one write. The gain is drawn away from 1 so
a kernel that drops it fails. Strict.
"""

import torch
import torch.nn as nn

batch_size = 16
features = 64
dim1 = 448
dim2 = 448
eps = 1e-5


class Model(nn.Module):
    def __init__(self, features, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.empty(features).uniform_(0.5, 1.5))

    def forward(self, x):
        rms = torch.sqrt(torch.mean(x * x, dim=1, keepdim=True) + self.eps)
        return x / rms * self.weight.view(1, -1, 1, 1)


def get_inputs():
    return [torch.randn(batch_size, features, dim1, dim2)]


def get_init_inputs():
    return [features, eps]


KERNELPROOF = {
    "variants": {
        "small": {"batch_size": 2, "features": 16, "dim1": 8, "dim2": 8},
        "odd": {"batch_size": 3, "features": 7, "dim1": 9, "dim2": 13},
    },
    "cpu": ["small", "odd"],
    "timed": ["default"],
    "precision": "fp32",
    "domains": ["any"],
    "flops": "4 * batch_size * features * dim1 * dim2",
    "policy": "strict",
}
