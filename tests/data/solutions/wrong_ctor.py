import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):  # the task passes `features`
        super().__init__()

    def forward(self, x):
        return torch.relu(x)
