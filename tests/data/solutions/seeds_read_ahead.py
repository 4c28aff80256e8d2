"""An attack on timing (tests only): read the round's seeds from the harness and compute the whole
round in its first call; the other calls return at once.

A torch helper that walks frames on its caller's behalf (TorchScript's resolution callback) reads
the harness's locals: the ``time`` request's header ``h``. When it carries every seed of the batch
(as it once did), the first call draws every call's inputs itself, computes every output with the
honest kernel, and the later calls hand them back. Each output is right for its inputs, so every
fingerprint and re-check passes; only the per-call times are shaped: one long call, the rest free.
When the header carries one seed, nothing is read ahead and every call is computed honestly.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl
from torch._jit_internal import createResolutionCallbackFromFrame

from kernelproof.inputs import timed_inputs


@triton.jit
def scale_relu_kernel(x_ptr, s_ptr, b_ptr, y_ptr, n, features, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    col = offs % features
    s = tl.load(s_ptr + col, mask=mask)
    b = tl.load(b_ptr + col, mask=mask)
    tl.store(y_ptr + offs, tl.maximum(x, 0.0) * s + b, mask=mask)


def _harness_header():
    """The innermost harness frame's ``h`` (a timing request's header), or None."""
    for up in range(1, 40):
        try:
            env = createResolutionCallbackFromFrame(up)
            h = env("h")
        except Exception:  # noqa: BLE001 - no such frame or no such name there
            continue
        if isinstance(h, dict):
            return h, env
    return None, None


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.scale = nn.Parameter(torch.randn(features))
        self.bias = nn.Parameter(torch.randn(features))
        self._header = None
        self._ready = []

    def _kernel(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        scale_relu_kernel[(triton.cdiv(n, 256),)](x, self.scale, self.bias, y, n, x.shape[-1], BLOCK=256)
        return y

    def forward(self, x):
        h, env = _harness_header()
        if h is None or h.get("op") != "time" or "seeds" not in h:
            return self._kernel(x)
        if h is not self._header:  # a new batch: compute all of it now
            self._header = h
            slots, fixed, scalars = env("slots"), env("fixed"), env("scalars")
            self._ready = [
                self._kernel(timed_inputs(slots, fixed, scalars, seed, x.device)[0])
                for seed in h["seeds"][1:]
            ]
            return self._kernel(x)
        return self._ready.pop(0) if self._ready else self._kernel(x)
