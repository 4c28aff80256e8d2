"""Per-sample cross-entropy loss over class logits with int64 targets, in fp32.

reduction="none" keeps one loss per row: a scalar mean would let a near-constant answer hide.
The targets are integers and are never cast. 32768 x 8192 logits are 1.07 GB read once: eager
log_softmax + nll_loss writes and rereads them, about 0.5 ms on an H200; a fused kernel reads once
(about 0.25 ms). Strict.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 32768
num_classes = 8192


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, predictions, targets):
        return F.cross_entropy(predictions, targets, reduction="none")


def get_inputs():
    return [torch.randn(batch_size, num_classes), torch.randint(0, num_classes, (batch_size,))]


def get_init_inputs():
    return []


KERNELPROOF = {
    "variants": {
        "small": {"batch_size": 16, "num_classes": 256},
        "odd": {"batch_size": 7, "num_classes": 129},
    },
    "cpu": ["small", "odd"],
    "timed": ["default"],
    "precision": "fp32",
    "domains": ["any", "fixed"],
    "flops": "4 * batch_size * num_classes",
    "policy": "strict",
}
