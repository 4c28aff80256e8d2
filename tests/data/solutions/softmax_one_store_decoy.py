"""tests/exploits/tasks/softmax.py answered by torch.softmax, beside a Triton kernel that stores one element.

The decoy an optimiser once kept on the CPU: the kernel launches (so the presence of a launch is
seen) but does none of the work, and the forward calls the reference's own operation outside it.
Correct, so on the CPU it passes, flagged reference_ops_outside_kernels (claims.reference_ops_outside
lists aten::softmax); its speedup, an interpreter's, is withheld.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def one_store_kernel(y_ptr):
    tl.store(y_ptr, 1.0)


class ModelNew(nn.Module):
    def forward(self, x):
        scratch = torch.empty(1, device=x.device, dtype=x.dtype)
        one_store_kernel[(1,)](scratch)
        return torch.softmax(x, dim=-1)
