"""GELU (tanh) from a Triton kernel autotuned over pruned configs, with the tuner's warmup= and rep=.

Legit case: published Triton code passes `prune_configs_by` and the (deprecated) `warmup=` / `rep=`
to `@triton.autotune`. For those Triton makes a benchmarker of its own over the GPU driver; under
the interpreter on a CPU machine it raised "0 active drivers" (an `environment` error). Like the
default benchmarker it is the driver's, so the first config left after pruning is taken there
(kernelproof/worker/interpreter.py); on a GPU it tunes as usual.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


def _prune(configs, named_args, **kwargs):
    n = named_args["n"]
    return [c for c in configs if c.kwargs["BLOCK"] <= max(128, triton.next_power_of_2(n))]


@triton.autotune(
    configs=[
        triton.Config({"BLOCK": b}, num_warps=w, num_stages=s)
        for b in (128, 512, 2048)
        for w in (2, 4)
        for s in (1, 2)
    ],
    key=["n"],
    prune_configs_by={"early_config_prune": _prune},
    warmup=5,
    rep=20,
)
@triton.jit
def _gelu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(axis=0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    inner = 0.7978845608028654 * (x + 0.044715 * x * x * x)
    t = 2.0 / (1.0 + tl.exp(-2.0 * inner)) - 1.0
    tl.store(y_ptr + offs, 0.5 * x * (1.0 + t), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        _gelu_kernel[lambda META: (triton.cdiv(n, META["BLOCK"]),)](x, y, n)
        return y
