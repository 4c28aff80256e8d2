import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()

    def forward(self, x):
        while True:
            x = x + 0
