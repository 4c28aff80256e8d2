"""A task written in fp16: its Model is made half with ``.half()`` and get_inputs() makes fp16
activations; no KERNELPROOF dict. Judged in fp16 as written."""

import torch

BATCH, IN, OUT = 8, 64, 32


class Model(torch.nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = torch.nn.Linear(in_features, out_features).half()

    def forward(self, x):
        return torch.relu(self.linear(x))


def get_inputs():
    return [torch.randn(BATCH, IN, dtype=torch.float16)]


def get_init_inputs():
    return [IN, OUT]
