"""The build step in the evaluation pipeline: CUDA and native solutions are built by the parent's
builder pool, the verdict says how, and the worker loads the build instead of compiling.

On this CPU-only torch nvcc compiles but nothing runs: the native tests build real cubins for
sm_90a (the pool's architecture is fixed by the test) and the worker loads them without
compiling; their forward then fails on the CPU, which is not what these tests look at. The
`cuda`-backend solutions here reference load_inline (which is what makes them `cuda`) but only
leave a file where load_inline would, so they build in a few seconds; the real load_inline
round trip is the `gpu` test at the end.
"""

from __future__ import annotations

import shutil
from concurrent.futures import Future
from pathlib import Path

import pytest
from running_deadline import WRITE_MARKER, count_from_marker

from kernelproof.api import evaluate, evaluate_many
from kernelproof.build import BuildCache, BuildOptions, BuildResult, CacheTamperError
from kernelproof.build.env import nvcc_path
from kernelproof.evaluate import build as build_phase
from kernelproof.executors.local import LocalPool
from kernelproof.options import EvalOptions
from kernelproof.verdict import from_json

DATA = Path(__file__).resolve().parents[1] / "data"
TASK = str(DATA / "tasks" / "scale_relu.py")
needs_nvcc = pytest.mark.skipif(nvcc_path() is None, reason="needs nvcc")

MODEL = """

class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.scale = nn.Parameter(torch.randn(features))
        self.bias = nn.Parameter(torch.randn(features))

    def forward(self, x):
{forward}
"""
TORCH_FORWARD = "        return torch.relu(x) * self.scale + self.bias"

# A `cuda` solution (it names load_inline) whose import leaves an artifact where load_inline
# builds, and loads it when it is there: the worker must find the parent's copy.
FAKE_CUDA = """import os
import pathlib

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# {tag}
lib = pathlib.Path(os.environ["TORCH_EXTENSIONS_DIR"]) / "kp-fake-0123456789abcdef" / "fake.so"
if not lib.exists():
    lib.parent.mkdir(parents=True, exist_ok=True)
    lib.write_bytes(b"built by the builder")
if False:
    load_inline(name="never", cpp_sources="", functions=[])
""" + MODEL.format(forward=TORCH_FORWARD)

NATIVE = '''import torch
import torch.nn as nn

from kernelproof.native import load_cuda

SRC = r"""
extern "C" __global__ void scale_relu(const float* x, const float* s, const float* b, float* y, int rows, int cols) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < rows * cols) {
        float v = x[i] > 0.f ? x[i] : 0.f;
        y[i] = v * s[i % cols] + b[i % cols]%s
    }
}
"""
mod = load_cuda(SRC, ["scale_relu"])
''' + MODEL.format(
    forward="""        y = torch.empty_like(x)
        n = x.numel()
        mod.scale_relu(grid=((n + 255) // 256,), block=(256,), args=(x, self.scale, self.bias, y, x.shape[0], x.shape[1]))
        return y"""
)

CPP_SYNTAX_ERROR = '''import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP = """
int count_rows(int n) {
    int total = 0
    return total + n;
}
"""
ext = load_inline(name="kp_broken_cpp", cpp_sources=CPP, no_implicit_headers=True)
''' + MODEL.format(forward=TORCH_FORWARD)


def options(cache: Path, **changes) -> EvalOptions:
    base = EvalOptions(
        device="cpu",
        db="",
        seed=11,
        correctness_only=True,
        seeds_per_case=1,
        timeout_s=60,
        build_cache=str(cache),
        build_workers=1,
    )
    return base.replace(**changes)


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    """One pool (workers and builders) and one build cache for the module, as in a session."""
    root = tmp_path_factory.mktemp("pipeline-builds")
    pool = LocalPool(build_options=BuildOptions(arch="9.0a"))
    yield pool, root / "cache", root
    pool.close()


def write(root: Path, name: str, text: str) -> str:
    path = root / name
    path.write_text(text)
    return str(path)


def test_cpp_syntax_error_is_a_compile_error_naming_the_file_and_line(env):
    pool, cache, root = env
    v = evaluate(TASK, write(root, "cpp_broken.py", CPP_SYNTAX_ERROR), options(cache), pool=pool)
    assert v.codes == ["compile_error"], v.reasons
    reason = v.reasons[0]
    assert "main.cpp:4:5: error:" in reason.message  # the compiler's own line, the build's paths dropped
    assert "/kp-build-" not in reason.message
    assert "Traceback" not in reason.message + reason.detail and len(reason.detail.splitlines()) <= 10
    assert v.build is not None and v.build.backend == "cuda" and not v.build.ok and v.correctness is None


@needs_nvcc
@pytest.mark.parametrize("share", ["above", "within"])
def test_a_task_larger_than_its_share_of_the_memory_waits_for_its_build_before_holding_any(tmp_path, share):
    """Where the evaluation would hold more than its share of the device's memory, the build is
    awaited first, and a build that fails stops it before setup holds anything; within its share
    setup runs while the solution builds, and the failure is found after it (evaluate/setup.py)."""
    from kernelproof.executors.device_memory import DeviceMemory

    pool = LocalPool(build_options=BuildOptions(arch="9.0a"))
    capacity = 1 if share == "above" else 1 << 40  # bytes: one, or a terabyte
    memory = DeviceMemory(capacity, "cpu")
    pool.memory = lambda device: memory
    try:
        path = write(tmp_path, "cpp_broken.py", CPP_SYNTAX_ERROR)
        v = evaluate(TASK, path, options(tmp_path / "cache"), pool=pool)
    finally:
        pool.close()
    assert v.codes == ["compile_error"] and "main.cpp:4:5: error:" in v.reasons[0].message, v.reasons
    assert v.build is not None and not v.build.ok  # the verdict says what was built, either way
    steps = v.environment["steps"]
    if share == "above":
        assert "setup/build_wait" in steps and not {"setup/admission", "setup/shapes"} & set(steps), steps
    else:
        assert "setup/build_wait" not in steps and {"setup/admission", "setup/shapes"} <= set(steps), steps


def test_native_compile_error_points_at_the_solution_line(env):
    pool, cache, root = env
    v = evaluate(TASK, write(root, "native_broken.py", NATIVE.replace("%s", "")), options(cache), pool=pool)
    assert v.codes == ["compile_error"], v.reasons
    # nvcc reports a missing ';' at the next line: line 7 of the kernel source, line 12 of the file
    assert 'kernels.cu(7): error: expected a ";" (solution line 12)' in v.reasons[0].message


def test_build_that_writes_outside_its_staging_directory_is_forbidden(env):
    """Outside the temporary folders (the builder's /tmp is its own: a path there is not shared)."""
    import uuid

    pool, cache, root = env
    outside = Path.home() / ".cache" / f"kp-test-planted-{uuid.uuid4().hex[:12]}"
    target = outside / "planted.so"
    src = FAKE_CUDA.replace(
        "# {tag}",
        f"pathlib.Path({str(outside)!r}).mkdir(parents=True)\nopen({str(target)!r}, 'wb').write(b'x')",
    )
    try:
        v = evaluate(TASK, write(root, "planter.py", src), options(cache), pool=pool)
        assert v.codes == ["forbidden_construct"], v.reasons
        assert "outside the worker's private directory" in v.reasons[0].message
        assert not target.exists()
    finally:
        shutil.rmtree(outside, ignore_errors=True)


SHELL_FLAG = """import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

FLAG = {flag}
ext = load_inline(name="kp_shell", cpp_sources="int kp_answer() {{ return 42; }}", no_implicit_headers=True,
                  extra_cflags=["-O3", FLAG])
""" + MODEL.format(forward=TORCH_FORWARD)


@pytest.mark.parametrize("where", ["literal", "computed"])
def test_shell_in_a_flag_is_a_compile_error_naming_it_and_runs_nothing(env, where):
    """torch's load_inline writes extra_cflags into build.ninja unquoted and ninja runs it through
    /bin/sh (issue 15): the backtick would create the marker. A literal flag is refused by the
    parent before any builder starts; a computed one by the builder, before anything is compiled."""
    pool, cache, root = env
    marker = root / f"marker-{where}"
    flag = f"`touch {marker}`"
    text = repr(flag) if where == "literal" else "'`' + " + repr(flag[1:-1]) + " + '`'"
    v = evaluate(
        TASK, write(root, f"shell_{where}.py", SHELL_FLAG.format(flag=text)), options(cache), pool=pool
    )
    assert v.codes == ["compile_error"], v.reasons
    assert f"extra_cflags entry {flag!r} refused: shell metacharacter '`'" in v.reasons[0].message
    assert ("line 6:" in v.reasons[0].message) == (where == "literal")  # the call's line
    assert not marker.exists()
    assert any("refused_flag" in f for f in v.flags) == (where == "literal")


def test_build_that_never_ends_is_a_timeout(env, monkeypatch):
    count_from_marker(monkeypatch)  # the builder's 3 s start once the solution runs, after torch's import
    pool, cache, root = env
    src = FAKE_CUDA.replace("# {tag}", WRITE_MARKER + "while True:\n    pass")
    v = evaluate(TASK, write(root, "hang.py", src), options(cache, timeout_s=3), pool=pool)
    assert v.codes == ["timeout"], v.reasons
    assert "did not finish in 3 s" in v.reasons[0].message


def test_second_evaluation_is_a_cache_hit_and_the_worker_loads_the_build(env):
    pool, cache, root = env
    sol = write(root, "fake_cuda.py", FAKE_CUDA.replace("{tag}", "cache hit"))
    first = evaluate(TASK, sol, options(cache), pool=pool)
    second = evaluate(TASK, sol, options(cache), pool=pool)
    assert first.passed and second.passed, (first.reasons, second.reasons)
    assert not first.build.cached and first.build.build_s > 0
    assert second.build.cached and second.build.build_s == 0
    doc = second.to_json()
    assert doc["build"]["cached"] is True and "build_done_s" in doc["environment"]["phases"]
    assert from_json(doc).build == second.build


@needs_nvcc
def test_native_cache_hit_is_loaded_by_the_worker_without_compiling(env):
    pool, cache, root = env
    sol = write(root, "native_ok.py", NATIVE.replace("%s", ";"))
    first = evaluate(TASK, sol, options(cache), pool=pool)
    second = evaluate(TASK, sol, options(cache), pool=pool)
    for v in (first, second):  # built for sm_90a; running it needs a CUDA device this machine lacks
        assert v.codes == ["environment"] and "need a CUDA device" in v.reasons[0].message
        assert v.verdict.value == "error" and v.build.ok
    assert not first.build.cached and second.build.cached


def test_tampered_cache_entry_is_refused_and_rebuilt(env):
    pool, cache, root = env
    sol = write(root, "victim.py", FAKE_CUDA.replace("{tag}", "tamper"))
    assert evaluate(TASK, sol, options(cache), pool=pool).passed
    planted = list(cache.glob("entries/*/*/files/torch_extensions/kp-fake-*/fake.so"))
    assert planted
    for p in planted:
        p.write_bytes(b"planted library")
    v = evaluate(TASK, sol, options(cache), pool=pool)
    assert v.passed, v.reasons
    assert v.build.rebuilt and not v.build.cached
    assert any(f.startswith("build_cache:") for f in v.flags)


def test_entry_refused_twice_is_build_cache_tamper(tmp_path):
    class AlwaysTampered:
        options = BuildOptions(arch="")
        submits = 0

        def materialize(self, result, dest):
            raise CacheTamperError("ab" * 16, "fake.so does not match its manifest hash")

        def submit(self, path, data=None):
            self.submits += 1
            done: Future[BuildResult] = Future()
            done.set_result(BuildResult(True, 1.0, "", "cuda", key="ab" * 16))
            return done

    class Worker:
        private = tmp_path

    pool = AlwaysTampered()
    first = BuildResult(True, 0.0, "", "cuda", cached=True, key="ab" * 16)
    pending = build_phase.PendingBuild(pool, "sol.py", Future())  # type: ignore[arg-type]
    provided = build_phase.provide(pending, first, Worker(), 10)  # type: ignore[arg-type]
    rebuilt, reason = provided.rebuilt, provided.failure
    assert rebuilt and pool.submits == 1
    assert reason is not None and reason.code.value == "build_cache_tamper"
    assert "manifest hash" in reason.detail


def test_evaluate_many_builds_up_front_and_keeps_other_backends_unbuilt(env):
    pool, cache, root = env
    built = write(root, "many_cuda.py", FAKE_CUDA.replace("{tag}", "many"))
    plain = str(DATA / "solutions" / "plain_torch.py")
    verdicts = {
        v.solution.path: v for v in evaluate_many([(TASK, built), (TASK, plain)], options(cache), pool=pool)
    }
    assert verdicts[built].passed and verdicts[built].build is not None
    assert verdicts[plain].passed and verdicts[plain].build is None
    assert BuildCache(cache).keys()  # the build went through the cache given in the options


KERNELBENCH_ADD = '''
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

src = """
#include <torch/extension.h>
__global__ void scale_relu_kernel(const float* x, const float* s, const float* b, float* y, int n, int cols) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = fmaxf(x[i], 0.f) * s[i % cols] + b[i % cols];
}
torch::Tensor scale_relu_cuda(torch::Tensor x, torch::Tensor s, torch::Tensor b) {
    auto y = torch::empty_like(x);
    int n = x.numel();
    scale_relu_kernel<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), s.data_ptr<float>(), b.data_ptr<float>(),
                                                y.data_ptr<float>(), n, x.size(1));
    return y;
}
"""
ext = load_inline(name="kp_pipeline_scale_relu", cpp_sources="torch::Tensor scale_relu_cuda(torch::Tensor x, torch::Tensor s, torch::Tensor b);",
                  cuda_sources=src, functions=["scale_relu_cuda"])
''' + MODEL.format(forward="        return ext.scale_relu_cuda(x.contiguous(), self.scale, self.bias)")


@pytest.mark.gpu
def test_load_inline_solution_is_built_once_and_the_worker_loads_it(tmp_path):
    sol = write(tmp_path, "kb_scale_relu.py", KERNELBENCH_ADD)
    pool = LocalPool()
    try:
        opts = options(tmp_path / "cache", device="cuda", timeout_s=600)
        first = evaluate(TASK, sol, opts, pool=pool)
        second = evaluate(TASK, sol, opts, pool=pool)
    finally:
        pool.close()
    assert first.passed and second.passed, (first.reasons, second.reasons)
    assert not first.build.cached and first.build.strategy in ("split", "split+pch")
    assert second.build.cached and second.build.wait_s < 5
    assert first.build.worker_compiled is False and second.build.worker_compiled is False


def test_a_single_evaluation_builds_before_it_takes_the_gpu(env, monkeypatch):
    """Other evaluations on the device must not wait behind a compile."""
    pool, cache, root = env
    path = write(root, "lock_cuda.py", FAKE_CUDA.replace("{tag}", "lock"))
    futures, done_when_locked = [], []
    real_prebuild, real_slots = pool.prebuild, pool.device_slots

    def prebuild(solutions, device, opts):
        pending = real_prebuild(solutions, device, opts)
        futures.extend(p.future for p in pending.values())
        return pending

    class Watched:
        def __init__(self, lock):
            self.lock = lock

        def __enter__(self):
            done_when_locked.append(bool(futures) and all(f.done() for f in futures))
            return self.lock.__enter__()

        def __exit__(self, *exc):
            return self.lock.__exit__(*exc)

    monkeypatch.setattr(pool, "prebuild", prebuild)
    monkeypatch.setattr(pool, "device_slots", lambda device, slots=1: Watched(real_slots(device, slots)))
    v = evaluate(TASK, path, options(cache), pool=pool)
    assert v.build is not None and v.passed, v.reasons
    assert done_when_locked == [True]


def test_once_timing_starts_the_workers_build_requests_are_refused(env, monkeypatch):
    """Correctness and warm-up run every timed shape first: a build asked for inside the timing
    would time the compiler. The chain closes the evaluation's build service before it times."""
    from kernelproof.build import runtime_request as build_requests
    from kernelproof.evaluate import chain

    pool, cache, root = env
    sol = write(root, "fake_cuda_timed.py", FAKE_CUDA.replace("{tag}", "timed"))
    answers = []
    real = chain.time_candidate

    def time_candidate(setup, checked, worker, *rest):
        args = {"name": "kp_late", "cpp_sources": ["int f();"], "cuda_sources": []}
        answers.append(worker.build_handler(build_requests.message(args)))  # as the worker's message
        return real(setup, checked, worker, *rest)

    monkeypatch.setattr(chain, "time_candidate", time_candidate)
    v = evaluate(
        TASK, sol, options(cache, correctness_only=False, time_budget_s=0.5, max_rounds=2), pool=pool
    )
    assert len(answers) == 1 and answers[0]["ok"] is False, answers
    assert "timing has started" in answers[0]["message"] and "kp_late" in answers[0]["message"]
    assert any("build_request kp_late: refused: timing has started" in f for f in v.flags), v.flags
