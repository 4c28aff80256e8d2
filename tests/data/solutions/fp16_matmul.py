"""tests/exploits/tasks/matmul.py computed in fp16: both operands rounded to half, the product cast back.

Every call computes from its own inputs, in a lower precision than the task's fp32 contract:
precision_downgrade naming fp16 (torch's CPU matmul runs in fp16 too).
"""

import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, A, B):
        return (A.half() @ B.half()).float()
