"""An attack on CPU timing (tests only): take more of the machine than the worker was given.

At construction it asks for every core the machine has (``sched_setaffinity``) and raises torch's
thread count to at least four; each forward then runs a matrix product on all those threads, as
many OpenMP threads spinning on the baseline's core, if they could reach it, would slow it.
"""

import os

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.scale = nn.Parameter(torch.randn(features))
        self.bias = nn.Parameter(torch.randn(features))
        try:
            os.sched_setaffinity(0, range(os.cpu_count() or 1))
        except OSError:
            pass
        torch.set_num_threads(max(4, os.cpu_count() or 1))
        self.work = torch.randn(256, 256)

    def forward(self, x):
        self.work = (self.work @ self.work).tanh()  # OpenMP threads at work
        return torch.relu(x) * self.scale + self.bias
