"""Wrong only on bf16 inputs: zeros when the inputs are bf16, the product otherwise. Judged in
fp32 (the task cast to float32) it would pass; judged as written (bf16) it must be a mismatch."""

import torch


class ModelNew(torch.nn.Module):
    def forward(self, a, b):
        if a.dtype == torch.bfloat16:
            return torch.zeros_like(a)
        return a * b
