"""Pre-norm transformer block: x + Attn(LN(x)), then + MLP(LN(.)) with GELU, no dropout, in bf16.

The bf16 contract: the dtype transformer blocks run in. Attention is written out (QKV projection,
softmax(Q K^T / sqrt(d)) V over 16 heads of 64, output projection) so the function is explicit.
16 x 1024 tokens of width 1024 with a 4096-wide MLP is 0.48 TFLOP of GEMMs (about 0.7 ms at
~730 TFLOP/s bf16) plus 0.5 GB score tensors that eager attention writes and rereads three times:
about 2 ms eager on an H200. The LayerNorm parameters are drawn away from 1/0 so a kernel that
drops them fails. library-ok: the GEMMs may stay in cuBLAS.
"""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 16
seq_len = 1024
d_model = 1024
num_heads = 16
ffn_dim = 4096


class Model(nn.Module):
    def __init__(self, d_model, num_heads, ffn_dim):
        super().__init__()
        self.num_heads = num_heads
        self.ln1 = nn.LayerNorm(d_model)
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.ln2 = nn.LayerNorm(d_model)
        self.fc1 = nn.Linear(d_model, ffn_dim)
        self.fc2 = nn.Linear(ffn_dim, d_model)
        with torch.no_grad():
            for norm in (self.ln1, self.ln2):
                norm.weight.uniform_(0.5, 1.5)
                norm.bias.uniform_(-0.5, 0.5)

    def forward(self, x):
        batch, seq, width = x.shape
        heads = self.num_heads
        head_dim = width // heads
        qkv = self.qkv(self.ln1(x)).view(batch, seq, 3, heads, head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        scores = torch.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(head_dim))
        attn = torch.matmul(torch.softmax(scores, dim=-1), v)
        x = x + self.proj(attn.transpose(1, 2).reshape(batch, seq, width))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


def get_inputs():
    return [torch.randn(batch_size, seq_len, d_model)]


def get_init_inputs():
    return [d_model, num_heads, ffn_dim]


KERNELPROOF = {
    "variants": {
        "small": {"batch_size": 2, "seq_len": 16, "d_model": 64, "num_heads": 4, "ffn_dim": 128},
        "odd": {"batch_size": 2, "seq_len": 13, "d_model": 48, "num_heads": 3, "ffn_dim": 129},
    },
    "cpu": ["small", "odd"],
    "timed": ["default"],
    "precision": "bf16",
    "domains": ["any"],
    "flops": "2 * batch_size * seq_len * (4 * d_model * d_model + 2 * d_model * ffn_dim)"
    " + 4 * batch_size * seq_len * seq_len * d_model"
    " + 5 * batch_size * num_heads * seq_len * seq_len + 20 * batch_size * seq_len * d_model",
    "policy": "library-ok",
}
