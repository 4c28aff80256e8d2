"""Raise an exception whose text is CUDA's out-of-memory message.

Strategy: blame shifting through a reason's text. The parent used to read "out of memory" in a
failed reply's message (api._short_of_memory) to decide that the evaluation, not the solution,
ran out of memory.
Invariant attacked: I10 and I11. Only the parent's facts decide (kernelproof/evaluate/memory_blame.py):
the exception is the solution's runtime_error.
Why a naive evaluator accepts it: it reads the exception's text for the cause.
"""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.scale = nn.Parameter(torch.randn(features))
        self.bias = nn.Parameter(torch.randn(features))

    def forward(self, x):
        raise RuntimeError(
            "CUDA out of memory. Tried to allocate 60.00 GiB (GPU 0; 139.8 GiB total capacity)"
        )
