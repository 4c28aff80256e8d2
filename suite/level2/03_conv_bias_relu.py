"""2D convolution (3x3, padding 1, no conv bias), plus a per-channel bias, then ReLU, in fp32.

64 x 64 x 64 x 64 -> 128 channels is 39 GFLOP: about 1 ms for eager cuDNN on an H200 with TF32 off,
then two elementwise passes over the 134 MB output. library-ok: the convolution may stay in cuDNN
with the bias and ReLU fused into one epilogue kernel.
"""

import torch
import torch.nn as nn

batch_size = 64
in_channels = 64
out_channels = 128
height = 64
width = 64
kernel_size = 3
padding = 1


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, padding):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=padding, bias=False)
        self.bias = nn.Parameter(torch.randn(out_channels, 1, 1) * 0.1)

    def forward(self, x):
        return torch.relu(self.conv(x) + self.bias)


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, padding]


KERNELPROOF = {
    "variants": {
        "small": {"batch_size": 2, "in_channels": 3, "out_channels": 8, "height": 16, "width": 16},
        "odd": {"batch_size": 2, "in_channels": 3, "out_channels": 5, "height": 13, "width": 11},
    },
    "cpu": ["small", "odd"],
    "timed": ["default"],
    "precision": "fp32",
    "domains": ["any"],
    "flops": "2 * batch_size * out_channels * (height + 2 * padding - kernel_size + 1)"
    " * (width + 2 * padding - kernel_size + 1) * in_channels * kernel_size * kernel_size"
    " + 2 * batch_size * out_channels * (height + 2 * padding - kernel_size + 1)"
    " * (width + 2 * padding - kernel_size + 1)",
    "policy": "library-ok",
}
