"""Print CUDA's out-of-memory words, then end the worker with the harness's own exit status.

Strategy: blame shifting. The parent used to decide that a worker's death was kernelproof's own
out-of-memory by reading "out of memory" in the worker's log with exit status 3 (the harness's):
``too_large``, an error that is never stored and never the solution's fault.
Invariant attacked: I10 and I11 (a refusal that is kernelproof's own limit never blames the
solution, and the solution never gets to claim one). The parent decides from its own facts only
(kernelproof/evaluate/memory_blame.py): on the CPU there are none, so this is a crash.
Why a naive evaluator accepts it: it reads the log for the cause of a death.
"""

import os
import sys

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.scale = nn.Parameter(torch.randn(features))
        self.bias = nn.Parameter(torch.randn(features))

    def forward(self, x):
        text = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 60.00 GiB.\n"
        sys.stdout.write(text)
        sys.stderr.write(text)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(3)
