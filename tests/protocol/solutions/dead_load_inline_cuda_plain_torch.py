"""Plain PyTorch, wrong, beside an uncalled function that would build CUDA with load_inline.

Strategy: blame shifting through dead code. The parent used to decide `environment` from a regex
over the source (`__global__`, `cuda_sources=`): on a machine without CUDA this wrong solution (a
ReLU for the task's GELU) was never run, never stored, never blamed, only because a function it
never calls holds a CUDA source.
Invariant attacked: I10 and I11. Only a CUDA build the solution truly asks for, recorded by the
builder as the call runs, with the parent's facts about the machine, makes `environment`: dead code
decides nothing, and this solution is a mismatch, a fail, stored.
Why a naive evaluator accepts it: it reads the source for CUDA and excuses the machine.
Control: the same file with the function called at import (CALL = True) truly asks for a CUDA build,
which this CPU machine cannot do: `environment`, not stored.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CALL = False

SRC = """
__global__ void gelu_kernel(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i];
}
"""


def _fast_path():
    return load_inline(name="kp_dead_gelu", cpp_sources="", cuda_sources=SRC, functions=[])


if CALL:
    _fast_path()


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.relu(x)  # not the task's GELU
