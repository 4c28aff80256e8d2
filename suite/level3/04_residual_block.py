"""ResNet basic block: conv3x3-BN-ReLU, conv3x3-BN, plus the identity skip, then ReLU, in fp32.

The reference runs in training mode, as KernelBench does, so BatchNorm normalises with the batch's
own per-channel mean and (biased) variance, which a solution must compute; the running statistics
do not affect the output. The BN affine parameters are drawn away from 1/0 so a kernel that drops
them fails. 32 x 128 x 56 x 56 (a ResNet stage) is 59 GFLOP of convolution: about 2 ms eager on an
H200 with TF32 off. library-ok: the convolutions may stay in cuDNN.
"""

import torch
import torch.nn as nn

batch_size = 32
channels = 128
height = 56
width = 56


class Model(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, kernel_size=3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, kernel_size=3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)
        with torch.no_grad():
            for bn in (self.bn1, self.bn2):
                bn.weight.uniform_(0.5, 1.5)
                bn.bias.uniform_(-0.5, 0.5)

    def forward(self, x):
        out = torch.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return torch.relu(out + x)


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return [channels]


KERNELPROOF = {
    "variants": {
        "small": {"batch_size": 2, "channels": 4, "height": 8, "width": 8},
        "odd": {"batch_size": 2, "channels": 3, "height": 9, "width": 11},
    },
    "cpu": ["small", "odd"],
    "timed": ["default"],
    "precision": "fp32",
    "domains": ["any"],
    "flops": "2 * 2 * batch_size * channels * channels * 9 * height * width + 12 * batch_size * channels * height * width",
    "policy": "library-ok",
    "mode": "train",
}
