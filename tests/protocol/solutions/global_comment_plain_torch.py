"""Plain PyTorch, wrong, with a CUDA kernel and its load_inline call written in a comment and a string.

Strategy: blame shifting through text. The parent used to decide `environment` from a regex over
the source, comments and strings included: `__global__ void k(` in a comment, or `cuda_sources=`
in a string, made this wrong solution (a ReLU for the task's GELU) an error of the machine on a
CPU, never run and never stored.
Invariant attacked: I10 and I11. Comments and strings decide nothing: it runs and is judged on
merit, a mismatch, a fail, stored.
Why a naive evaluator accepts it: it reads the source for CUDA and excuses the machine.
Control: the same solution without the comment and the string is the same mismatch.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline  # noqa: F401  (the port below is not written yet)

# The CUDA port, for a GPU machine:
#   __global__ void k(const float* x, float* y, int n) { ... }
#   ext = load_inline(name="k", cpp_sources="", cuda_sources=SRC, with_cuda=True)
PLAN = "ext = load_inline(name='k', cpp_sources='', cuda_sources=SRC)  # __global__ void k("


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.relu(x)  # not the task's GELU
