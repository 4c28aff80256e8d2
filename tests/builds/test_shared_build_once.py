"""A build that several candidates share runs once, also when they arrive at the same moment.

The build cache's key covers the solution's bytes and everything else that feeds its build
(kernelproof/build/pool.py); its per-key lock (kernelproof/build/cache.py, an fcntl lock, held
across threads and processes) makes a second build of a key wait and then take the first one's
entry. These tests count the compiles: two pools over one cache stand for two services or two
batches sharing a build cache.
"""

from __future__ import annotations

import threading

from kernelproof.build import BuildCache, BuilderPool, BuildOptions
from kernelproof.build import pool as pool_module

CPU = BuildOptions(arch="")
SOLUTION = "import torch.nn as nn\n\nclass ModelNew(nn.Module):\n    pass\n"


def _counting_compiles(monkeypatch, arrivals: int) -> list[str]:
    """Every real build is recorded; each build waits until `arrivals` requests have come."""
    compiles: list[str] = []
    real = pool_module.build_solution
    start = threading.Barrier(arrivals)
    real_build = BuilderPool.build

    def arrive_together(self, source_path, data=None):
        start.wait(timeout=30)
        return real_build(self, source_path, data)

    def counted(source_path, *rest, **kw):
        compiles.append(str(source_path))
        return real(source_path, *rest, **kw)

    monkeypatch.setattr(pool_module, "build_solution", counted)
    monkeypatch.setattr(BuilderPool, "build", arrive_together)
    return compiles


def test_two_identical_requests_at_the_same_moment_compile_once(tmp_path, monkeypatch):
    compiles = _counting_compiles(monkeypatch, 2)
    sol = tmp_path / "same.py"
    sol.write_text(SOLUTION)
    with BuilderPool(
        BuildCache(tmp_path / "cache"), 2, device="cpu", options=CPU, work_root=tmp_path
    ) as pool:
        results = [f.result() for f in [pool.submit(sol), pool.submit(sol)]]
    assert all(r.ok for r in results)
    assert len(compiles) == 1
    assert sorted(r.cached for r in results) == [False, True]
    assert results[0].key == results[1].key


def test_two_pools_over_one_cache_compile_a_shared_build_once(tmp_path, monkeypatch):
    compiles = _counting_compiles(monkeypatch, 2)
    first, second = tmp_path / "first.py", tmp_path / "second.py"
    first.write_text(SOLUTION)
    second.write_text(SOLUTION)  # the same bytes under another path: the same build
    cache = tmp_path / "cache"
    with (
        BuilderPool(BuildCache(cache), 1, device="cpu", options=CPU, work_root=tmp_path) as a,
        BuilderPool(BuildCache(cache), 1, device="cpu", options=CPU, work_root=tmp_path) as b,
    ):
        futures = [a.submit(first), b.submit(second)]
        results = [f.result() for f in futures]
    assert all(r.ok for r in results)
    assert len(compiles) == 1
    assert sorted(r.cached for r in results) == [False, True]


def test_other_bytes_are_another_build(tmp_path, monkeypatch):
    """The control: the count does see a second compile where the bytes differ."""
    compiles = _counting_compiles(monkeypatch, 2)
    one, other = tmp_path / "one.py", tmp_path / "other.py"
    one.write_text(SOLUTION)
    other.write_text(SOLUTION + "# other bytes\n")
    with BuilderPool(
        BuildCache(tmp_path / "cache"), 2, device="cpu", options=CPU, work_root=tmp_path
    ) as pool:
        results = [f.result() for f in [pool.submit(one), pool.submit(other)]]
    assert all(r.ok and not r.cached for r in results)
    assert len(compiles) == 2
