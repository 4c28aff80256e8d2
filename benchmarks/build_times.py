"""Build times: torch's load_inline, kernelproof's split build (with and without a precompiled
header), cache hits, and the native backend. Prints one table; never gates CI.

On the GPU machine:      python benchmarks/build_times.py
On a CPU-only torch:     python benchmarks/build_times.py --cpu-torch
  (nvcc and g++ compile; the link uses stub CUDA libraries and nothing is imported or run)

Every cold figure is a fresh process with an empty build directory; "cpu s" is the user+system
time of that process and its compilers (what a pool of builders pays per build).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

# KernelBench-style sources, unchanged in form: torch/extension.h in the .cu, a launcher using torch.
SOLUTION = r'''
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = """
#include <torch/extension.h>
#include <cuda_runtime.h>

__global__ void {name}_kernel(const float* a, const float* b, float* out, int size) {{
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < size) {{
        out[idx] = {expr};
    }}
}}

torch::Tensor {name}_cuda(torch::Tensor a, torch::Tensor b) {{
    auto size = a.numel();
    auto out = torch::zeros_like(a);
    const int block_size = 256;
    const int num_blocks = (size + block_size - 1) / block_size;
    {name}_kernel<<<num_blocks, block_size>>>(a.data_ptr<float>(), b.data_ptr<float>(), out.data_ptr<float>(), size);
    return out;
}}
"""
cpp_source = "torch::Tensor {name}_cuda(torch::Tensor a, torch::Tensor b);"
ext = load_inline(name="{name}", cpp_sources=cpp_source, cuda_sources=cuda_source,
                  functions=["{name}_cuda"], verbose=False, extra_cflags={cflags}, extra_ldflags=[""])

class ModelNew(nn.Module):
    def forward(self, a, b):
        return ext.{name}_cuda(a, b)

def check():
    a, b = torch.rand(4099, device="cuda"), torch.rand(4099, device="cuda")
    torch.testing.assert_close(ext.{name}_cuda(a, b), {ref})
'''
VARIANTS = [
    ("add", "a[idx] + b[idx]", "a + b", '[""]'),
    ("mul", "a[idx] * b[idx]", "a * b", '["-O3"]'),
    ("fma2", "a[idx] * 2.0f + b[idx]", "a * 2 + b", '[""]'),
    ("sub", "a[idx] - b[idx]", "a - b", '["-O3"]'),
    ("maxab", "fmaxf(a[idx], b[idx])", "torch.maximum(a, b)", '[""]'),
]
NATIVE = r"""
extern "C" __global__ void add(const float* a, const float* b, float* out, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a[i] + b[i];
}
"""


def child(args: argparse.Namespace) -> int:
    """Import one solution in this fresh process and report how its build went."""
    import torch.utils.cpp_extension as ce

    if args.cpu_torch:
        from kernelproof.build.env import cuda_home

        ce.CUDA_HOME = cuda_home()
    from kernelproof.build import inline

    if args.mode != "torch":
        inline.install(pch_dir=args.pch_dir, fast=True)
    import importlib.util

    t = time.perf_counter()
    ok, err = True, ""
    try:
        spec = importlib.util.spec_from_file_location("sol", args.solution)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        if not args.cpu_torch:
            mod.check()
    except Exception as e:  # noqa: BLE001
        ok, err = False, str(e)[-300:]
    seconds = time.perf_counter() - t
    ext_dir = Path(os.environ["TORCH_EXTENSIONS_DIR"])
    built = any(ext_dir.rglob("*.so"))
    recs = inline.records()
    print(
        json.dumps({"seconds": seconds, "ok": ok, "built": built, "err": err, "records": recs}, default=str)
    )
    return 0


def run_child(
    solution: Path, mode: str, ext_dir: Path, opts: argparse.Namespace, pch_dir: str | None = None
) -> dict:
    env = dict(os.environ, TORCH_EXTENSIONS_DIR=str(ext_dir), PYTHONPATH=str(REPO))
    if opts.cpu_torch:
        env["TORCH_CUDA_ARCH_LIST"] = env.get("TORCH_CUDA_ARCH_LIST", "9.0a")
        env["LIBRARY_PATH"] = str(_stubs())
    cmd = [sys.executable, __file__, "--child", "--mode", mode, "--solution", str(solution)]
    if pch_dir:
        cmd += ["--pch-dir", pch_dir]
    if opts.cpu_torch:
        cmd.append("--cpu-torch")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    out = subprocess.run(cmd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    try:
        doc = json.loads(out.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        doc = {"ok": False, "built": False, "err": out.stderr[-500:], "records": []}
    doc["wall"] = wall
    doc["cpu"] = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return doc


def _stubs() -> Path:
    d = Path(tempfile.gettempdir()) / "kp-bench-stubs"
    if not (d / "libtorch_cuda.so").exists():
        d.mkdir(exist_ok=True)
        (d / "e.c").write_text("")
        for lib in ("c10_cuda", "torch_cuda"):
            subprocess.run(["cc", "-shared", str(d / "e.c"), "-o", str(d / f"lib{lib}.so")], check=True)
    return d


def row(table: list, what: str, docs: list[dict], key: str = "wall") -> None:
    vals = [d[key] for d in docs]
    cpu = [d["cpu"] for d in docs]
    good = sum(1 for d in docs if d.get("built") or d.get("ok"))
    strategies = sorted({r.get("strategy", "") for d in docs for r in d.get("records", [])})
    table.append(
        (
            what,
            len(vals),
            statistics.median(vals),
            min(vals),
            max(vals),
            statistics.median(cpu),
            good,
            ",".join(strategies),
        )
    )


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--child", action="store_true")
    ap.add_argument("--mode", default="torch")
    ap.add_argument("--solution")
    ap.add_argument("--pch-dir")
    ap.add_argument("--cpu-torch", action="store_true", help="CPU-only torch: compile and link only")
    ap.add_argument("--n", type=int, default=3, help="sources per cold measurement (median over them)")
    ap.add_argument("--skip-torch", action="store_true", help="skip torch's own cold builds (slowest)")
    ap.add_argument(
        "--skip-split", action="store_true", help="skip the split build without precompiled headers"
    )
    ap.add_argument("--json", help="also write the raw results here")
    args = ap.parse_args()
    if args.child:
        return child(args)

    work = Path(tempfile.mkdtemp(prefix="kp-bench-"))
    sols = []
    for name, expr, ref, cflags in VARIANTS[: args.n]:
        p = work / f"{name}.py"
        p.write_text(SOLUTION.format(name=name, expr=expr, ref=ref, cflags=cflags))
        sols.append(p)
    table: list = []
    raw: dict[str, list] = {}

    def cold(mode: str, pch_dir: str | None = None) -> list[dict]:
        docs = []
        for s in sols:
            ext = work / f"ext-{mode}-{s.stem}-{time.monotonic_ns()}"
            docs.append(run_child(s, mode, ext, args, pch_dir))
            print(
                f"  {mode:10s} {s.stem:6s} {docs[-1]['wall']:6.1f} s  cpu {docs[-1]['cpu']:6.1f} s  "
                f"built={docs[-1]['built']} ok={docs[-1]['ok']} {docs[-1]['err'][:120]}",
                flush=True,
            )
        raw[mode] = docs
        return docs

    if not args.skip_torch:
        row(table, "load_inline, torch (cold)", cold("torch"))
    if not args.skip_split:
        row(table, "load_inline, split (cold, no pch)", cold("split"))

    from kernelproof.build import pch

    if args.cpu_torch:
        import torch.utils.cpp_extension as ce

        from kernelproof.build.env import cuda_home

        ce.CUDA_HOME = cuda_home()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    cache_root = work / "cache"
    dirs = [pch.ensure_pch(cache_root, []), pch.ensure_pch(cache_root, ["-O3"])]
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    table.append(
        (
            "precompiled headers, 2 flag sets (once)",
            2,
            time.perf_counter() - t,
            0,
            0,
            (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
            2,
            "",
        )
    )
    t = time.perf_counter()
    private = work / "private-pch"
    for d in dirs:
        pch.copy_pch(cache_root, d.name, private)
    table.append(("  private copy of both headers per build", 1, time.perf_counter() - t, 0, 0, 0, 1, ""))
    row(table, "load_inline, split + pch (cold)", cold("split+pch", str(private)))

    if not args.cpu_torch:
        # Cache hit: a worker's fresh process importing a prebuilt module (materialized copy).
        from kernelproof.build import BuildCache, BuilderPool

        with BuilderPool(BuildCache(cache_root), 2, device="cuda", work_root=work) as pool:
            pool.warm_pch()
            t = time.perf_counter()
            results = [f.result() for f in [pool.submit(s) for s in sols]]
            pool_wall = time.perf_counter() - t
            table.append(
                (
                    f"pool: {len(sols)} cold builds, 2 builders",
                    len(sols),
                    pool_wall,
                    0,
                    0,
                    0,
                    sum(r.ok for r in results),
                    ",".join(sorted({r.strategy for r in results})),
                )
            )
            hits = []
            for s in sols:
                t = time.perf_counter()
                r = pool.submit(s).result()
                hit_s = time.perf_counter() - t
                dest = work / f"worker-{s.stem}"
                t = time.perf_counter()
                pool.materialize(r, dest)
                mat_s = time.perf_counter() - t
                doc = run_child(s, "split", dest / "torch_extensions", args)
                doc["wall"] = hit_s + mat_s + doc["seconds"]
                hits.append(doc)
            row(table, "cache hit: lookup + materialize + worker import", hits)
        docs = []
        for i in range(args.n):
            docs.append(_native_child(work / f"native-{i}", NATIVE.replace("add(", f"add{i}(")))
        row(table, "native load_cuda, cold (nvcc -cubin)", docs)
        row(table, "  its first launch (CuPy module load + launch)", docs, key="first_launch")
        docs = [_native_child(work / "native-0", NATIVE.replace("add(", "add0("))]
        row(table, "native load_cuda, cached cubin", docs)

    print()
    print(
        f"{'what':52s} {'n':>2s} {'median s':>9s} {'min':>6s} {'max':>6s} {'cpu s':>7s} {'ok':>3s}  strategy"
    )
    for what, n, med, lo, hi, cpu, good, strat in table:
        print(f"{what:52s} {n:2d} {med:9.2f} {lo:6.1f} {hi:6.1f} {cpu:7.1f} {good:3d}  {strat}")
    if args.json:
        Path(args.json).write_text(json.dumps({"table": table, "raw": raw}, default=str, indent=1))
    shutil.rmtree(work, ignore_errors=True)
    return 0


def _native_child(native_dir: Path, source: str) -> dict:
    kernel = source.split("void ")[1].split("(")[0]
    code = (
        "import json, time, torch\nfrom kernelproof.native import load_cuda\n"
        "a = torch.rand(4099, device='cuda'); b = torch.rand(4099, device='cuda'); o = torch.empty_like(a)\n"
        f"t = time.perf_counter()\nm = load_cuda({source!r}, [{kernel!r}])\nbuild = time.perf_counter() - t\n"
        f"t = time.perf_counter()\nm.{kernel}(grid=(17,), block=(256,), args=(a, b, o, 4099))\n"
        "torch.cuda.synchronize(); launch = time.perf_counter() - t\ntorch.testing.assert_close(o, a + b)\n"
        "print(json.dumps({'seconds': build, 'first_launch': launch, 'ok': True}))\n"
    )
    env = dict(os.environ, KERNELPROOF_NATIVE_DIR=str(native_dir), PYTHONPATH=str(REPO))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    try:
        doc = json.loads(out.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        doc = {"seconds": float("nan"), "ok": False, "err": out.stderr[-300:]}
    doc["wall"] = doc["seconds"]
    doc["cpu"] = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return doc


if __name__ == "__main__":
    sys.exit(main())
