"""Layer normalization over the last dimension (hidden = 4096) with affine weight and bias, in fp32.

The affine parameters are drawn away from their 1/0 defaults so a kernel that drops them fails.
49152 tokens x 4096 is 0.8 GB in and out: about 0.4 ms on an H200, memory-bound (held under 2 GB).
Strict.
"""

import torch
import torch.nn as nn

batch_size = 49152
hidden = 4096


class Model(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.norm = nn.LayerNorm(hidden, eps=1e-5)
        with torch.no_grad():
            self.norm.weight.uniform_(0.5, 1.5)
            self.norm.bias.uniform_(-0.5, 0.5)

    def forward(self, x):
        return self.norm(x)


def get_inputs():
    return [torch.randn(batch_size, hidden)]


def get_init_inputs():
    return [hidden]


KERNELPROOF = {
    "variants": {"small": {"batch_size": 16, "hidden": 256}, "odd": {"batch_size": 7, "hidden": 129}},
    "cpu": ["small", "odd"],
    "timed": ["default"],
    "precision": "fp32",
    "domains": ["any"],
    "flops": "8 * batch_size * hidden",
    "policy": "strict",
}
