"""The fp16 linear + ReLU as written: a half Linear, the same arithmetic as the task's."""

import torch


class ModelNew(torch.nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = torch.nn.Linear(in_features, out_features).half()

    def forward(self, x):
        return torch.relu(self.linear(x))
