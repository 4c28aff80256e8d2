"""BuilderPool: cache hits, one build per key, and a poisoning attempt that the parent refuses."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelproof.build import BuildCache, BuilderPool, BuildOptions, CacheTamperError

CPU = BuildOptions(arch="")
CPU_UNGUARDED = BuildOptions(arch="", guard=False)  # lets a test solution write outside its staging area

# A solution whose import leaves an artifact where (and as) a load_inline build does.
EXT_DIR = "kp-victim-0123456789abcdef"
VICTIM = """
import os, pathlib
d = pathlib.Path(os.environ["TORCH_EXTENSIONS_DIR"]) / "kp-victim-0123456789abcdef"
d.mkdir(parents=True, exist_ok=True)
(d / "victim.so").write_bytes(b"honest library")
import torch.nn as nn
class ModelNew(nn.Module):
    pass
"""

# A solution whose import hunts for the build cache and plants a library in another entry.
# It is handed the cache root through a file, standing in for an attacker that found it by
# scanning the file system (it is root: permission bits do not stop it).
PLANTED = "ff" * 32  # the entry name the poisoner plants beside the real shards (entries/<key[:2]>/)
POISONER = """
import os, pathlib
root = pathlib.Path(open({hint!r}).read())
for so in root.glob("entries/*/*/files/**/*.so"):
    so.write_bytes(b"planted library")
for sub in ("entries", "locks"):
    pathlib.Path(root, sub, "ff" * 32).mkdir(parents=True, exist_ok=True)  # PLANTED
import torch.nn as nn
class ModelNew(nn.Module):
    pass
"""


def test_second_submit_of_a_source_is_a_cache_hit(tmp_path):
    sol = tmp_path / "victim.py"
    sol.write_text(VICTIM)
    with BuilderPool(
        BuildCache(tmp_path / "cache"), 2, device="cpu", options=CPU, work_root=tmp_path
    ) as pool:
        assert pool.cached(sol) is None
        first = pool.submit(sol).result()
        second = pool.submit(sol).result()
        looked_up = pool.cached(sol)  # the same answer without a queue
    assert first.ok and not first.cached
    assert second.ok and second.cached and second.key == first.key
    assert looked_up == second
    assert f"torch_extensions/{EXT_DIR}/victim.so" in second.artifacts


def test_concurrent_submits_of_one_source_build_once(tmp_path, uncontained_builds):
    """The count is kept in a file outside the staging areas, which only an uncontained build can write."""
    count = tmp_path / "imports.txt"
    sol = tmp_path / "counted.py"
    sol.write_text(f"open({str(count)!r}, 'a').write('x')\n")
    with BuilderPool(
        BuildCache(tmp_path / "cache"), 3, device="cpu", options=CPU_UNGUARDED, work_root=tmp_path
    ) as pool:
        results = [f.result() for f in [pool.submit(sol) for _ in range(3)]]
    assert all(r.ok for r in results)
    assert count.read_text() == "x"
    assert sum(not r.cached for r in results) == 1


def _poison_setup(tmp_path):
    cache = BuildCache(tmp_path / "cache")
    hint = tmp_path / "hint.txt"
    hint.write_text(str(cache.root))
    victim, poisoner = tmp_path / "victim.py", tmp_path / "poisoner.py"
    victim.write_text(VICTIM)
    poisoner.write_text(POISONER.format(hint=str(hint)))
    return cache, victim, poisoner


def test_poisoning_build_is_refused_by_the_os_layers_and_the_entry_stays_intact(tmp_path):
    """Contained, the builder cannot reach the cache even knowing its path (written into its source)."""
    cache, victim, poisoner = _poison_setup(tmp_path)
    poisoner.write_text(
        POISONER.format(hint="/dev/null").replace("open('/dev/null').read()", repr(str(cache.root)))
    )
    with BuilderPool(cache, 1, device="cpu", options=CPU, work_root=tmp_path) as pool:
        built = pool.submit(victim).result()
        poisoned = pool.submit(poisoner).result()
        assert not poisoned.ok and ("Permission denied" in poisoned.log or poisoned.violation), poisoned
        pool.materialize(built, tmp_path / "worker")  # the victim's entry is intact
    assert not (cache.root / "entries" / PLANTED).exists()  # not the victim's shard, which may be "ff"
    assert (
        tmp_path / "worker" / "torch_extensions" / EXT_DIR / "victim.so"
    ).read_bytes() == b"honest library"


def test_poisoning_build_is_stopped_by_the_guards_before_it_writes(tmp_path, uncontained_builds):
    cache, victim, poisoner = _poison_setup(tmp_path)
    with BuilderPool(cache, 1, device="cpu", options=CPU, work_root=tmp_path) as pool:
        built = pool.submit(victim).result()
        poisoned = pool.submit(poisoner).result()
        assert not poisoned.ok and "outside the worker's private directory" in poisoned.violation
        pool.materialize(built, tmp_path / "worker")  # the victim's entry is intact
    assert (
        tmp_path / "worker" / "torch_extensions" / EXT_DIR / "victim.so"
    ).read_bytes() == b"honest library"


def test_poisoned_entry_is_refused_when_the_guards_are_off(tmp_path, uncontained_builds):
    """The second line of defence: a write the guards miss (native code, a compiler plugin)
    is caught by the parent's hash check when the entry is materialised."""
    cache, victim, poisoner = _poison_setup(tmp_path)
    with BuilderPool(cache, 1, device="cpu", options=CPU_UNGUARDED, work_root=tmp_path) as pool:
        built = pool.submit(victim).result()
        assert built.ok
        assert pool.submit(poisoner).result().ok  # its build "succeeds": the damage is elsewhere
        with pytest.raises(CacheTamperError):
            pool.materialize(built, tmp_path / "worker")
        assert not (tmp_path / "worker" / "torch_extensions" / EXT_DIR / "victim.so").exists()
        rebuilt = pool.submit(victim).result()  # the tampered entry was evicted: built again, honestly
    assert rebuilt.ok and not rebuilt.cached
    pool.materialize(rebuilt, tmp_path / "worker2")
    assert (
        tmp_path / "worker2" / "torch_extensions" / EXT_DIR / "victim.so"
    ).read_bytes() == b"honest library"


def test_failed_builds_are_cached_with_their_log(tmp_path):
    sol = tmp_path / "bad.py"
    sol.write_text("raise ImportError('no such kernel')\n")
    with BuilderPool(
        BuildCache(tmp_path / "cache"), 1, device="cpu", options=CPU, work_root=tmp_path
    ) as pool:
        first = pool.submit(sol).result()
        again = pool.submit(sol).result()
    assert not first.ok and "ImportError: no such kernel" in first.log
    assert again.cached and not again.ok and again.log == first.log


def test_staging_directories_are_removed_after_publication(tmp_path):
    sol = tmp_path / "victim.py"
    sol.write_text(VICTIM)
    work = tmp_path / "work"
    work.mkdir()
    with BuilderPool(BuildCache(tmp_path / "cache"), 1, device="cpu", options=CPU, work_root=work) as pool:
        assert pool.submit(sol).result().ok
    assert list(Path(work).iterdir()) == []


KERNELBENCH_ADD = '''
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

src = """
#include <torch/extension.h>
__global__ void add_kernel(const float* a, const float* b, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a[i] + b[i];
}
torch::Tensor add_cuda(torch::Tensor a, torch::Tensor b) {
    auto out = torch::empty_like(a);
    int n = a.numel();
    add_kernel<<<(n + 255) / 256, 256>>>(a.data_ptr<float>(), b.data_ptr<float>(), out.data_ptr<float>(), n);
    return out;
}
"""
ext = load_inline(name="kp_pool_add", cpp_sources="torch::Tensor add_cuda(torch::Tensor a, torch::Tensor b);",
                  cuda_sources=src, functions=["add_cuda"], extra_cflags=["-O3"])

class ModelNew(nn.Module):
    def forward(self, a, b):
        return ext.add_cuda(a, b)
'''

WORKER = """
import importlib.util, json, sys, torch
from kernelproof.build import install_load_inline
from kernelproof.build import inline
install_load_inline()
spec = importlib.util.spec_from_file_location("sol", sys.argv[1])
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
a, b = torch.rand(5000, device="cuda"), torch.rand(5000, device="cuda")
torch.testing.assert_close(mod.ModelNew()(a, b), a + b)
print(json.dumps([r["strategy"] for r in inline.records()]))
"""


@pytest.mark.gpu
def test_cuda_build_is_published_and_the_worker_loads_it_without_compiling(tmp_path):
    import json
    import os
    import subprocess
    import sys

    from kernelproof.build import artifact_env

    sol = tmp_path / "add.py"
    sol.write_text(KERNELBENCH_ADD)
    with BuilderPool(BuildCache(tmp_path / "cache"), 1, device="cuda", work_root=tmp_path) as pool:
        result = pool.submit(sol).result()
        assert result.ok, result.log
        assert result.strategy in ("split", "split+pch")
        pool.materialize(result, tmp_path / "worker")
    env = dict(os.environ, **artifact_env(tmp_path / "worker"))
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
    done = subprocess.run([sys.executable, "-c", WORKER, str(sol)], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == ["prebuilt"]


# -- issue 15, the build path: flags refused before anything runs, only declared outputs published ---
SHELL_FLAG = """
import torch.nn as nn
import torch.utils.cpp_extension as ce
from torch.utils.cpp_extension import load_inline

ce.CUDA_HOME = ce.CUDA_HOME or "/usr/local/cuda"  # a CPU-only torch knows no toolkit; a GPU machine's does
CPP = "int kp_answer() {{ return 42; }}"
CU = "__global__ void kp_fill(float* x) {{ x[0] = 1.0f; }}"
ext = load_inline(name="kp_shell", cpp_sources=CPP, cuda_sources=CU, no_implicit_headers=True,
                  {argument}=[{flag!r}])

class ModelNew(nn.Module):
    pass
"""
FLAG_LISTS = ("extra_cflags", "extra_cuda_cflags", "extra_ldflags", "extra_include_paths")


# A backtick, a $(...), and $$(...), which ninja turns into $(...) for the shell.
SHELL_FORMS = ("`touch {marker}`", "$(touch {marker})", "$$(touch {marker})")


@pytest.mark.parametrize("form", SHELL_FORMS)
@pytest.mark.parametrize("argument", FLAG_LISTS)
def test_shell_in_a_literal_flag_is_a_compile_error_before_any_builder_runs(tmp_path, argument, form):
    """torch writes these lists into build.ninja unquoted and ninja runs it through /bin/sh: the
    command would create the marker. The parent refuses the literal flag before it starts a builder."""
    from kernelproof.evaluate.build import failure

    marker = tmp_path / "marker"
    flag = form.format(marker=marker)
    sol = tmp_path / "shell.py"
    sol.write_text(SHELL_FLAG.format(argument=argument, flag=flag))
    work = tmp_path / "work"
    work.mkdir()
    hopper = BuildOptions(arch="9.0a", fast_inline=False)  # torch's own path: ninja, through /bin/sh
    with BuilderPool(BuildCache(tmp_path / "cache"), 1, device="cpu", options=hopper, work_root=work) as pool:
        result = pool.submit(sol).result()
    reason = failure(result)
    assert reason is not None and reason.code.value == "compile_error"
    assert flag in reason.message and argument in reason.message and "line 9" in reason.message
    assert not marker.exists()
    assert list(work.iterdir()) == []  # no staging directory: no builder was started


def test_compiler_plugin_in_a_literal_flag_is_refused(tmp_path):
    sol = tmp_path / "plugin.py"
    sol.write_text(SHELL_FLAG.format(argument="extra_cflags", flag=f"-fplugin={tmp_path / 'evil.so'}"))
    with BuilderPool(
        BuildCache(tmp_path / "cache"), 1, device="cpu", options=CPU, work_root=tmp_path
    ) as pool:
        result = pool.submit(sol).result()
    assert not result.ok and "-fplugin=" in result.log and "loads a compiler plugin" in result.log


LEFTOVERS = """
import os, pathlib
out = pathlib.Path(os.environ["TORCH_EXTENSIONS_DIR"]).parent
ext = out / "torch_extensions" / "kp-clean-0123456789abcdef"
ext.mkdir(parents=True, exist_ok=True)
(ext / "clean.so").write_bytes(b"the extension")
(ext / "kp_inline.json").write_text("{}")
(ext / "evil.so").write_bytes(b"planted library")
(out / "sitecustomize.py").write_text("import os")
(out / "torch_extensions" / "usercustomize.py").write_text("import os")
(out / "native").mkdir(exist_ok=True)
(out / "native" / ("ab" * 16 + ".cubin")).write_bytes(b"cubin")
(out / "native" / "evil.so").write_bytes(b"planted library")
(out / "triton").mkdir(exist_ok=True)
(out / "triton" / "planted.py").write_text("import os")
import torch.nn as nn
class ModelNew(nn.Module):
    pass
"""
DECLARED = {
    "torch_extensions/kp-clean-0123456789abcdef/clean.so",
    "torch_extensions/kp-clean-0123456789abcdef/kp_inline.json",
    "native/" + "ab" * 16 + ".cubin",
}


def test_files_left_in_staging_beside_the_build_are_neither_published_nor_given_to_the_worker(tmp_path):
    sol = tmp_path / "leftovers.py"
    sol.write_text(LEFTOVERS)
    with BuilderPool(
        BuildCache(tmp_path / "cache"), 1, device="cpu", options=CPU, work_root=tmp_path
    ) as pool:
        built = pool.submit(sol).result()
        cached = pool.submit(sol).result()
        pool.materialize(built, tmp_path / "worker")
    assert built.ok, built.log
    assert set(built.artifacts) == DECLARED and set(cached.artifacts) == DECLARED
    given = {
        p.relative_to(tmp_path / "worker").as_posix() for p in (tmp_path / "worker").rglob("*") if p.is_file()
    }
    assert given == DECLARED


def test_key_covers_the_flag_policy_and_the_precompiled_headers_identity(tmp_path, monkeypatch):
    from kernelproof import compiler_flags

    source = SHELL_FLAG.format(argument="extra_cflags", flag="-O3").encode()
    pool = BuilderPool(BuildCache(tmp_path), 1, device="cpu", options=BuildOptions(arch="9.0a"))
    try:
        monkeypatch.setattr(pool.headers, "identity", lambda flags: "a" * 24)
        first = pool.key_for(source)
        assert pool.key_for(source) == first
        pool._pch_ids.clear()
        monkeypatch.setattr(pool.headers, "identity", lambda flags: "b" * 24)
        second = pool.key_for(source)
        assert second != first
        monkeypatch.setattr(compiler_flags, "POLICY", "kernelproof.build-flags/other")
        assert pool.key_for(source) != second
    finally:
        pool.shutdown()


def test_the_pool_builds_the_bytes_it_was_given_never_the_path_read_again(tmp_path, monkeypatch):
    """The evaluation read the solution once; the build is keyed by those bytes and the builder
    imports a copy of them, whatever the path holds by then (a file swapped after it was read)."""
    from kernelproof.build import pool as pool_module
    from kernelproof.build.builder import BuildResult

    honest, swapped = b"import torch.nn as nn\nclass ModelNew(nn.Module):\n    pass\n", b"# swapped\n"
    path = tmp_path / "sol.py"
    path.write_bytes(swapped)  # what the path holds when the build runs
    seen = []

    def fake_build(source_path, staging, device, timeout_s, options):
        seen.append(Path(source_path).read_bytes())
        return BuildResult(False, 0.0, "not built here", "torch")

    monkeypatch.setattr(pool_module, "build_solution", fake_build)
    with BuilderPool(BuildCache(tmp_path / "cache"), 1, device="cpu", options=CPU) as pool:
        result = pool.submit(path, honest).result()
        assert seen == [honest] and result.key == pool.key_for(honest)
