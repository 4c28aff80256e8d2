"""2D convolution (3x3, stride 1, padding 1, with bias) over NCHW input, in fp32.

32 x 64 x 128 x 128 -> 128 channels is 77 GFLOP over 0.4 GB: about 2-3 ms for eager cuDNN on an H200
with TF32 off (the fp32 contract pins it off). Strict: the convolution is the whole task (an
implicit-GEMM or direct kernel of the solution's own).
"""

import torch
import torch.nn as nn

batch_size = 32
in_channels = 64
out_channels = 128
height = 128
width = 128
kernel_size = 3
padding = 1


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, padding):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=padding)

    def forward(self, x):
        return self.conv(x)


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
    " * (width + 2 * padding - kernel_size + 1) * in_channels * kernel_size * kernel_size",
    "policy": "strict",
}
