"""The names the worker's harness reads from modules, which the worker checks by identity.

Read in a process that has just imported what a worker imports (fresh_process): this test process
has loaded parent-side kernelproof modules too, which a worker never holds.
"""

from __future__ import annotations

import json

import fresh_process
import pytest

PROBE = """
import json
import kernelproof.worker.message_loop
from kernelproof.worker.surface import harness_references
print(json.dumps(sorted({getattr(o, "__name__", type(o).__name__) + ":" + n for o, n in harness_references()})))
"""


@pytest.fixture(scope="module")
def refs() -> set[str]:
    out = fresh_process.run(PROBE, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


def test_the_torch_functions_a_fingerprint_calls_are_covered(refs):
    for name in ("where", "isfinite", "randn", "zeros", "Generator", "frombuffer", "float64"):
        assert f"torch:{name}" in refs, name
    assert "torch.cuda:synchronize" in refs  # a chain through a submodule
    assert "torch.profiler:profile" in refs  # imported inside a function


def test_the_harness_modules_own_names_are_covered_but_not_their_data(refs):
    assert {"kernelproof.inputs:torch", "kernelproof.inputs:fingerprint"} <= refs
    assert {"kernelproof.wire.protocol:read_sealed", "kernelproof.wire.protocol:_recv_exact"} <= refs
    assert "kernelproof.wire.protocol:BULK_AVAILABLE" not in refs  # a flag, not code: it may change
    assert "kernelproof.wire.protocol:MAX_TENSOR_BYTES" not in refs


def test_manual_seed_is_read_through_the_workers_own_binding(refs):
    """torch rebinds torch.manual_seed when torch._dynamo is imported (a solution using
    torch.compile): the worker calls the function it bound at import, which is what is checked."""
    assert "torch:manual_seed" not in refs
    assert "kernelproof.worker.loading:_manual_seed" in refs
