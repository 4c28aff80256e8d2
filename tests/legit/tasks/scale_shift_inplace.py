"""An affine map applied in place, y = x.mul_(scale).add_(shift), returning x: in place by contract.

The reference itself overwrites its input and returns it (as optimizer steps, cache updates and
fused residual adds in real models do), so a solution that writes its result into x and returns x
is doing exactly what the task asks.
"""

import torch
import torch.nn as nn

batch_size = 64
features = 512


class Model(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.scale = nn.Parameter(torch.randn(features))
        self.shift = nn.Parameter(torch.randn(features))

    def forward(self, x):
        return x.mul_(self.scale).add_(self.shift)


def get_inputs():
    return [torch.randn(batch_size, features)]


def get_init_inputs():
    return [features]


KERNELPROOF = {
    "variants": {"small": {"batch_size": 8, "features": 64}, "odd": {"batch_size": 7, "features": 33}},
    "cpu": ["small", "odd"],
    "precision": "fp32",
    "flops": "2 * batch_size * features",
    "inplace": [0],  # forward updates x: its new value is a result, and returning x is the contract
}
