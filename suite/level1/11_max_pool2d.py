"""2D max pooling, 3x3 window, stride 2, padding 1, over NCHW input, in fp32.

Overlapping windows and padding make the borders the hard part. 32 x 64 x 384 x 384 is 1.2 GB in
and 0.3 GB out: about 0.35 ms on an H200, memory-bound (held under 2 GB). Strict.
"""

import torch
import torch.nn as nn

batch_size = 32
channels = 64
height = 384
width = 384
kernel_size = 3
stride = 2
padding = 1


class Model(nn.Module):
    def __init__(self, kernel_size, stride, padding):
        super().__init__()
        self.pool = nn.MaxPool2d(kernel_size=kernel_size, stride=stride, padding=padding)

    def forward(self, x):
        return self.pool(x)


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return [kernel_size, stride, padding]


KERNELPROOF = {
    "variants": {
        "small": {"batch_size": 2, "channels": 4, "height": 16, "width": 16},
        "odd": {"batch_size": 2, "channels": 3, "height": 13, "width": 11},
    },
    "cpu": ["small", "odd"],
    "timed": ["default"],
    "precision": "fp32",
    "domains": ["any"],
    "flops": "batch_size * channels * ((height + 2 * padding - kernel_size) // stride + 1)"
    " * ((width + 2 * padding - kernel_size) // stride + 1) * kernel_size * kernel_size",
    "policy": "strict",
}
