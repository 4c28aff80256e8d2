"""An affine kernel replayed from a CUDA graph, returning a clone of the graph's output buffer.

Legit case: capturing the launch in a CUDA graph (to cut launch overhead) means copying each
call's input into the captured buffer and cloning the captured output, since the graph reuses
its buffers. Those device-to-device copies are data movement, neither the solution's work nor
library work (kernelproof/measure/coverage.py): under the strict policy it passes. On the CPU
there are no graphs; the kernel is launched directly.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _affine_kernel(x_ptr, s_ptr, b_ptr, y_ptr, n, features, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    col = offs % features
    x = tl.load(x_ptr + offs, mask=mask)
    s = tl.load(s_ptr + col, mask=mask)
    b = tl.load(b_ptr + col, mask=mask)
    tl.store(y_ptr + offs, x * s + b, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.scale = nn.Parameter(torch.randn(features))
        self.shift = nn.Parameter(torch.randn(features))
        self._graphs = {}

    def _launch(self, x, y):
        n = x.numel()
        _affine_kernel[(triton.cdiv(n, 1024),)](x, self.scale, self.shift, y, n, x.shape[-1], BLOCK=1024)

    def forward(self, x):
        x = x.contiguous()
        if not x.is_cuda:
            y = torch.empty_like(x)
            self._launch(x, y)
            return y
        key = (tuple(x.shape), self.scale.data_ptr(), self.shift.data_ptr())
        if key not in self._graphs:
            static_in, static_out = torch.empty_like(x), torch.empty_like(x)
            static_in.copy_(x)
            self._launch(static_in, static_out)  # compile and warm up outside the capture
            torch.cuda.synchronize()
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                self._launch(static_in, static_out)
            self._graphs[key] = (graph, static_in, static_out)
        graph, static_in, static_out = self._graphs[key]
        static_in.copy_(x)
        graph.replay()
        return static_out.clone()
