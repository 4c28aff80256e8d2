"""LeNet-5 on 32 x 32 single-channel images: two conv-ReLU-maxpool stages and three Linear layers, fp32.

Tiny channel counts (1 -> 6 -> 16) leave cuDNN's GEMM machinery underused, and eager PyTorch writes
each intermediate (617 MB after the first convolution at batch 32768) and reads it back for ReLU
and pooling: about 2 ms on an H200. The spatial sizes are fixed by the architecture, so the CPU
variants change only the batch. library-ok: convolutions and GEMMs may stay in the libraries.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 32768
num_classes = 10


class Model(nn.Module):
    def __init__(self, num_classes):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 6, kernel_size=5)
        self.conv2 = nn.Conv2d(6, 16, kernel_size=5)
        self.fc1 = nn.Linear(16 * 5 * 5, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, num_classes)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), kernel_size=2, stride=2)
        x = F.max_pool2d(F.relu(self.conv2(x)), kernel_size=2, stride=2)
        x = x.view(x.shape[0], -1)
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        return self.fc3(x)


def get_inputs():
    return [torch.randn(batch_size, 1, 32, 32)]


def get_init_inputs():
    return [num_classes]


KERNELPROOF = {
    "variants": {"small": {"batch_size": 4}, "odd": {"batch_size": 7, "num_classes": 7}},
    "cpu": ["small", "odd"],
    "timed": ["default"],
    "precision": "fp32",
    "domains": ["any"],
    "flops": "2 * batch_size * (6 * 28 * 28 * 25 + 16 * 10 * 10 * 150 + 400 * 120 + 120 * 84 + 84 * num_classes)",
    "policy": "library-ok",
}
