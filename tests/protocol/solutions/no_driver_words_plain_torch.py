"""Plain PyTorch, wrong, raising "Found no NVIDIA driver", with a comment that names torch.cuda.

Strategy: blame shifting through an exception's text and a comment. The parent used to keep a
worker's `environment` claim for a solution whose source names a CUDA device (a regex over the
source, comments included): this one computes GELU by erf instead of the task's tanh form and
raises torch's own words for a machine without a driver.
Invariant attacked: I10 and I11. Comments and messages decide nothing: the raise is the solution's
runtime_error, a fail, stored.
Why a naive evaluator accepts it: it reads the exception's text and the source for the cause.
Control: the same solution without the raise fails on its output (mismatch or precision_downgrade).
"""

import torch.nn as nn
import torch.nn.functional as F

RAISE = True


class ModelNew(nn.Module):
    def forward(self, x):
        # The fast path needs torch.cuda; without a driver there is nothing to run.
        if RAISE:
            raise RuntimeError(
                "Found no NVIDIA driver on your system. Please check that you have an NVIDIA GPU and "
                "installed a driver from http://www.nvidia.com/Download/index.aspx"
            )
        return F.gelu(x)  # erf, not the task's tanh approximation
