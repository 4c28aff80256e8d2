"""Convolution in cuDNN, then the bias add and ReLU fused into one Triton epilogue kernel, fp32.

Under the library-ok policy the convolution stays in the library; the epilogue, which eager
PyTorch runs as two kernels with an intermediate tensor, becomes one in-place pass over the
convolution's output: each program handles 1024 pixels of one (image, channel) plane.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl

BLOCK = 1024


@triton.jit
def _bias_relu_kernel(y_ptr, bias_ptr, C, HW, BLOCK: tl.constexpr):
    pid_s = tl.program_id(0)
    plane = tl.program_id(1).to(tl.int64)
    offs = pid_s * BLOCK + tl.arange(0, BLOCK)
    mask = offs < HW
    ptrs = y_ptr + plane * HW + offs
    bias = tl.load(bias_ptr + plane % C)
    y = tl.load(ptrs, mask=mask, other=0.0) + bias
    tl.store(ptrs, tl.maximum(y, 0.0, propagate_nan=tl.PropagateNan.ALL), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, padding):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=padding, bias=False)
        self.bias = nn.Parameter(torch.zeros(out_channels, 1, 1))

    def forward(self, x):
        y = F.conv2d(x, self.conv.weight, None, self.conv.stride, self.conv.padding).contiguous()
        n, c, h, w = y.shape
        grid = (triton.cdiv(h * w, BLOCK), n * c)
        _bias_relu_kernel[grid](y, self.bias, c, h * w, BLOCK=BLOCK, num_warps=4)
        return y
