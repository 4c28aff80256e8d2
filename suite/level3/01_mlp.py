"""Multi-layer perceptron: Linear + ReLU hidden layers and a final Linear, in fp32.

2048 x 4096 through two 4096-wide hidden layers to 1024 outputs is 155 GFLOP: about 3 ms of eager
cuBLAS SGEMM on an H200. library-ok: the GEMMs may stay in cuBLAS; the room left is fusing bias
and ReLU into the GEMMs or a faster fp32-accurate GEMM (3xTF32 is allowed by the contract).
"""

import torch
import torch.nn as nn

batch_size = 2048
input_size = 4096
hidden_size = 4096
num_hidden_layers = 2
output_size = 1024


class Model(nn.Module):
    def __init__(self, input_size, hidden_size, num_hidden_layers, output_size):
        super().__init__()
        layers = []
        width = input_size
        for _ in range(num_hidden_layers):
            layers += [nn.Linear(width, hidden_size), nn.ReLU()]
            width = hidden_size
        layers.append(nn.Linear(width, output_size))
        self.network = nn.Sequential(*layers)

    def forward(self, x):
        return self.network(x)


def get_inputs():
    return [torch.randn(batch_size, input_size)]


def get_init_inputs():
    return [input_size, hidden_size, num_hidden_layers, output_size]


KERNELPROOF = {
    "variants": {
        "small": {"batch_size": 16, "input_size": 64, "hidden_size": 48, "output_size": 16},
        "odd": {"batch_size": 7, "input_size": 33, "hidden_size": 65, "output_size": 10},
    },
    "cpu": ["small", "odd"],
    "timed": ["default"],
    "precision": "fp32",
    "domains": ["any"],
    "flops": "2 * batch_size * (input_size * hidden_size"
    " + (num_hidden_layers - 1) * hidden_size * hidden_size + hidden_size * output_size)"
    " + 2 * batch_size * num_hidden_layers * hidden_size",
    "policy": "library-ok",
}
