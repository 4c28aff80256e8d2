"""A candidate for dropout_train that keeps dropping elements in eval() mode (F.dropout, training=True)."""

import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return F.dropout(x, 0.5, training=True) * 2
