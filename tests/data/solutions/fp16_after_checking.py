"""An fp32 matmul while it is being checked, an fp16 one once the timing loop starts.

The shape of a kernel whose warm-up picks a faster, less precise path: kernelproof runs each
correctness case twice on equal inputs, so checked calls come in pairs; two unpaired calls in a
row mean the checking is over. From then on every call computes from its own inputs, in fp16.
The timed outputs fail their fingerprints, and the parent's fp16 recomputation of the same call
explains them: precision_downgrade naming fp16 and the change of path, never stale_output.
"""

import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.prev_key = None
        self.last_paired = False
        self.calls = 0
        self.fast = False

    def forward(self, A, B):
        key = float(A.reshape(-1)[0])
        paired = key == self.prev_key
        self.calls += 1
        if self.calls > 1 and not paired and not self.last_paired:
            self.fast = True
        self.last_paired, self.prev_key = paired, key
        if self.fast:
            return (A.half() @ B.half()).float()
        return A @ B
