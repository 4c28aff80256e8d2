"""GELU (tanh) from a Triton kernel, in the Python style published solutions are written in.

Legit case: prints and logging at INFO (logging reads its caller's frame for the record's line), a warning, a frozen dataclass of launch settings, a
typing.NamedTuple, numpy and math at import, an environment read, typing annotations, torch.no_grad
inside forward and an `if __name__ == "__main__":` self-check. The standard library writes and execs
the dataclass's and the namedtuple's methods; that was taken for the solution's own exec
(forbidden_construct, kernelproof/sandbox/guards.py).
"""

from __future__ import annotations

import logging
import math
import os
import warnings
from dataclasses import dataclass
from typing import NamedTuple, Optional

import numpy as np
import torch
import torch.nn as nn
import triton
import triton.language as tl

logger = logging.getLogger(__name__)
logging.basicConfig(level=logging.INFO)
SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
COEFF = float(np.float32(0.044715))
DEBUG = os.environ.get("GELU_DEBUG", "0") == "1"
print("fused gelu: loading")
warnings.warn("fused gelu: experimental kernel", stacklevel=1)


@dataclass(frozen=True)
class LaunchConfig:
    block: int = 1024
    num_warps: int = 4


class Grid(NamedTuple):
    programs: int


@triton.jit
def _gelu_kernel(x_ptr, y_ptr, n, C0: tl.constexpr, C1: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    inner = C0 * (x + C1 * x * x * x)
    t = 2.0 / (1.0 + tl.exp(-2.0 * inner)) - 1.0
    tl.store(y_ptr + offs, 0.5 * x * (1.0 + t), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, cfg: Optional[LaunchConfig] = None) -> None:  # noqa: UP045 - as published
        super().__init__()
        self.cfg = cfg or LaunchConfig()
        logger.info("ModelNew with %s", self.cfg)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            x = x.contiguous()
            y = torch.empty_like(x)
            n = x.numel()
            grid = Grid(triton.cdiv(n, self.cfg.block))
            _gelu_kernel[tuple(grid)](
                x, y, n, C0=SQRT_2_OVER_PI, C1=COEFF, BLOCK=self.cfg.block, num_warps=self.cfg.num_warps
            )
        if DEBUG:
            print("gelu", tuple(y.shape))
        return y


if __name__ == "__main__":
    model = ModelNew()
    sample = torch.randn(8, 64)
    print((model(sample) - torch.nn.functional.gelu(sample, approximate="tanh")).abs().max())
