"""Drawing an input takes the tensor drawn and little more, whatever the distribution and domain.

On an H200, KernelBench's 45_Average_Pooling_2D (a 17 GB input) was called too large: the
worker's draw of a heavy-tailed case made an int64 sign (32 GiB) and float copies beside it. Here
the address space is capped a little above what the tensor itself needs, so a draw that makes a
whole-size temporary fails, on the CPU, with nothing else to measure.
"""

from __future__ import annotations

import pytest
import torch
from address_space import capped

from kernelproof.inputs import DOMAIN_DISTRIBUTIONS, draw

ROWS, COLS = 2**13, 2**13  # 256 MiB of float32


PAIRS = sorted({(d, dom) for dom, ds in DOMAIN_DISTRIBUTIONS.items() for d in ds if d != "task"})


@pytest.mark.parametrize(("distribution", "domain"), PAIRS)
def test_a_draw_holds_its_tensor_and_chunk_sized_temporaries_only(distribution, domain):
    torch.set_num_threads(1)  # each thread's arena would count against the cap
    small = draw((64, 64), distribution, domain, 7, "cpu", torch.float32)  # warm the code paths
    tensor_bytes = ROWS * COLS * 4
    # the tensor, half of it again for the allocator's slack: any whole-size temporary breaks this
    with capped(tensor_bytes + tensor_bytes // 2):
        x = draw((ROWS, COLS), distribution, domain, 7, "cpu", torch.float32)
    assert x.shape == (ROWS, COLS) and x.dtype == torch.float32 and bool(torch.isfinite(x).all())
    assert small.shape == (64, 64)


def test_the_heavy_draw_keeps_its_tail_and_its_signs():
    x = draw((1 << 20,), "heavy", "any", 3, "cpu", torch.float32)
    assert 0.4 < float((x < 0).float().mean()) < 0.6  # a random sign
    assert float(x.abs().max()) > 100.0  # a Pareto tail, not a normal one
    assert torch.equal(x, draw((1 << 20,), "heavy", "any", 3, "cpu", torch.float32))  # the seed decides


@pytest.mark.parametrize(
    ("domain", "holds"),
    [
        ("positive", lambda x: bool((x >= 1e-3).all())),
        ("nonzero", lambda x: bool((x.abs() >= 1e-2).all())),
        ("unit", lambda x: bool(((x >= 0) & (x < 1)).all())),
    ],
)
def test_each_domain_holds_after_the_in_place_transforms(domain, holds):
    for distribution in DOMAIN_DISTRIBUTIONS[domain]:
        if distribution != "task":
            assert holds(draw((3, 1 << 16), distribution, domain, 11, "cpu", torch.float32)), distribution
