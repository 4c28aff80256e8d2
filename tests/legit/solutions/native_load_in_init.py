"""relu(x) * scale + bias as a kernelproof.native kernel compiled from __init__ (not at import).

Legit case: a solution that compiles its kernel when the model is built. The worker's cubin folder is
read-only: the call becomes a build request (kernelproof/build/runtime_request.py, call ``load_cuda``) the
parent's builder pool serves, and the cubin appears where the worker's load_cuda looks. Runs on a GPU.
"""

import torch
import torch.nn as nn

SRC = r"""
extern "C" __global__ void scale_relu(const float* x, const float* s, const float* b, float* y, int rows, int cols) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < rows * cols) {
        float v = x[i] > 0.f ? x[i] : 0.f;
        y[i] = v * s[i % cols] + b[i % cols];
    }
}
"""


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        from kernelproof.native import load_cuda

        self.scale = nn.Parameter(torch.randn(features))
        self.bias = nn.Parameter(torch.randn(features))
        self.mod = load_cuda(SRC, ["scale_relu"])

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        grid = ((n + 255) // 256,)
        self.mod.scale_relu(
            grid=grid, block=(256,), args=(x, self.scale, self.bias, y, x.shape[0], x.shape[1])
        )
        return y
