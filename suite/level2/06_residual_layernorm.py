"""Residual add followed by LayerNorm, LN(x + residual), over hidden = 4096, in fp32.

Eager PyTorch writes the sum and reads it back (five passes over 0.54 GB tensors, about 0.6 ms on an
H200); a fused kernel needs three (about 0.4 ms). The affine parameters are drawn away from 1/0 so
a kernel that drops them fails. Strict: no library GEMM is involved.
"""

import torch
import torch.nn as nn

batch_size = 32768
hidden = 4096


class Model(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.norm = nn.LayerNorm(hidden)
        with torch.no_grad():
            self.norm.weight.uniform_(0.5, 1.5)
            self.norm.bias.uniform_(-0.5, 0.5)

    def forward(self, x, residual):
        return self.norm(x + residual)


def get_inputs():
    return [torch.randn(batch_size, hidden), torch.randn(batch_size, hidden)]


def get_init_inputs():
    return [hidden]


KERNELPROOF = {
    "variants": {"small": {"batch_size": 16, "hidden": 256}, "odd": {"batch_size": 7, "hidden": 129}},
    "cpu": ["small", "odd"],
    "timed": ["default"],
    "precision": "fp32",
    "domains": ["any", "any"],
    "flops": "9 * batch_size * hidden",
    "policy": "strict",
}
