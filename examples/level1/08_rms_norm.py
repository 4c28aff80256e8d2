"""Channel RMS normalization of an NCHW tensor in one Triton kernel, fp32.

Each program loads a (channels x 128 pixels) tile: every channel's pixels are contiguous, so the
loads coalesce along the pixel axis, and the reduction across channels happens in registers. One
read and one write per element, against several passes for the eager version. The division and
square root are IEEE-rounded, and the operations run in the reference's order.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _rms_norm_kernel(x_ptr, w_ptr, y_ptr, C, S, eps, BLOCK_C: tl.constexpr, BLOCK_S: tl.constexpr):
    pid_s = tl.program_id(0)
    batch = tl.program_id(1).to(tl.int64)
    offs_c = tl.arange(0, BLOCK_C)
    offs_s = pid_s * BLOCK_S + tl.arange(0, BLOCK_S)
    c_ok = offs_c < C
    mask = c_ok[:, None] & (offs_s[None, :] < S)
    offs = batch * C * S + offs_c[:, None] * S + offs_s[None, :]
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    rms = tl.sqrt_rn(tl.div_rn(tl.sum(x * x, axis=0), C.to(tl.float32)) + eps)
    w = tl.load(w_ptr + offs_c, mask=c_ok, other=0.0)
    tl.store(y_ptr + offs, tl.div_rn(x, rms[None, :]) * w[:, None], mask=mask)


class ModelNew(nn.Module):
    def __init__(self, features, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(features))

    def forward(self, x):
        x = x.contiguous()
        batch, channels = x.shape[0], x.shape[1]
        spatial = x[0, 0].numel()
        y = torch.empty_like(x)
        block_c = triton.next_power_of_2(channels)
        block_s = max(16, min(256, 8192 // block_c))
        grid = (triton.cdiv(spatial, block_s), batch)
        _rms_norm_kernel[grid](
            x, self.weight, y, channels, spatial, self.eps, BLOCK_C=block_c, BLOCK_S=block_s, num_warps=8
        )
        return y
