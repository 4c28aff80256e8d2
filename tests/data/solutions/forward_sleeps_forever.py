"""A forward that never returns, asleep: a hang for tests whose subject is not the CPU it burns.

infinite_loop.py spins; this one waits, so a test that must sit out a timeout leaves the machine to
the tests beside it.
"""

import time

import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()

    def forward(self, x):
        while True:
            time.sleep(1.0)
