"""BatchNorm over features in eval mode: the running statistics and the affine parameters apply.

A legit-zoo task for solutions that fold the normalisation into a scale and a shift at
construction and recompute them when the harness gives its weights (a load_state_dict hook).
"""

import torch
import torch.nn as nn

batch_size = 64
features = 256


class Model(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.bn = nn.BatchNorm1d(features)
        with torch.no_grad():  # running statistics that are not the defaults
            self.bn.running_mean.copy_(torch.linspace(-0.5, 0.5, features))
            self.bn.running_var.copy_(torch.linspace(0.5, 2.0, features))

    def forward(self, x):
        return self.bn(x)


def get_inputs():
    return [torch.randn(batch_size, features)]


def get_init_inputs():
    return [features]


KERNELPROOF = {
    "variants": {"small": {"batch_size": 8, "features": 64}},
    "cpu": ["small"],
    "precision": "fp32",
    "mode": "eval",
}
