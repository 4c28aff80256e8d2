"""kernelproof.native: signatures, argument packing, nvcc cubins cached by content, GPU launches."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest
import torch

from kernelproof import native
from kernelproof.build.env import nvcc_path
from kernelproof.native import NativeCompileError, Param, load_cuda, pack_args, parse_signature

REPO = Path(__file__).resolve().parents[2]
SRC = r"""
// a comment mentioning __global__ void fake(int x)
extern "C" __global__ void __launch_bounds__(256) saxpy(const float* __restrict__ x, float* y, long long n, float a) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
extern "C" {
__global__ void fill(int* out, unsigned int n, int value, bool flag, double unused, size_t count) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = flag ? value : 0;
}
}
__global__ void mangled(float* x) {}
"""
needs_nvcc = pytest.mark.skipif(nvcc_path() is None, reason="needs nvcc")


def test_parses_pointer_and_scalar_parameters():
    assert parse_signature(SRC, "saxpy") == (
        Param("x", "float*", "P"),
        Param("y", "float*", "P"),
        Param("n", "long long", "q"),
        Param("a", "float", "f"),
    )
    assert [p.code for p in parse_signature(SRC, "fill")] == ["P", "I", "i", "?", "d", "Q"]


def test_rejects_kernel_without_c_linkage():
    with pytest.raises(NativeCompileError, match='extern "C"'):
        parse_signature(SRC, "mangled")


def test_rejects_missing_kernel_and_unpackable_types():
    with pytest.raises(NativeCompileError, match="not found"):
        parse_signature(SRC, "absent")
    src = 'extern "C" __global__ void k(float2 v) {}'
    with pytest.raises(NativeCompileError, match="cannot pack"):
        parse_signature(src, "k")


def test_packs_arguments_at_the_declared_widths():
    params = parse_signature(SRC, "fill")
    packed = pack_args("fill", params, (4096, 10, -3, True, 1.5, 7))
    assert [type(v) for v in packed] == [np.uint64, np.uint32, np.int32, np.bool_, np.float64, np.uint64]
    assert packed[2] == -3


def test_wrong_argument_count_names_the_signature():
    with pytest.raises(
        TypeError, match=r"saxpy\(float\* x, float\* y, long long n, float a\) takes 4 arguments, got 3"
    ):
        pack_args("saxpy", parse_signature(SRC, "saxpy"), (0, 0, 10))


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((torch.zeros(3), 0, 10, 1.0), "on cpu; it needs a CUDA tensor"),
        ((0, 0, 10.5, 1.0), "n is long long, got float"),
        ((0, 0, torch.tensor(3), 1.0), "got a tensor"),
        ((0, 0, 10, "2"), "a is float, got str"),
        ((0, 0, 1 << 70, 1.0), "cannot hold"),
        ((0, -8, 10, 1.0), "negative address"),
    ],
    ids=["cpu-tensor", "float-for-int", "tensor-for-scalar", "str-for-float", "overflow", "negative-pointer"],
)
def test_wrong_argument_types_name_the_parameter(args, message):
    with pytest.raises(TypeError, match=message):
        pack_args("saxpy", parse_signature(SRC, "saxpy"), args)


def test_cuda_array_interface_objects_pass_their_pointer():
    class Buf:
        __cuda_array_interface__ = {"data": (123456, False), "shape": (4,), "typestr": "<f4", "version": 3}

    assert pack_args("saxpy", parse_signature(SRC, "saxpy"), (Buf(), 0, 1, 1.0))[0] == 123456


@needs_nvcc
def test_compiles_a_cubin_once_per_content(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELPROOF_NATIVE_DIR", str(tmp_path))
    first = load_cuda(SRC, ["saxpy", "fill"], arch="9.0a")
    assert first.cubin.is_file() and first.cubin.parent == tmp_path
    assert first.cubin.read_bytes()[:4] == b"\x7fELF"
    again = load_cuda(SRC, ["saxpy"], arch="9.0a")
    assert again.cubin == first.cubin and native.records()[-1]["cached"] is True
    other = load_cuda(SRC, ["saxpy"], options=("-O3", "--use_fast_math"), arch="9.0a")
    assert other.cubin != first.cubin


@needs_nvcc
def test_compile_error_carries_nvccs_error_line(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELPROOF_NATIVE_DIR", str(tmp_path))
    bad = 'extern "C" __global__ void k(float* x) { x[0] = missing_value; }'
    with pytest.raises(
        NativeCompileError, match=r'kernels\.cu\(1\): error: identifier "missing_value" is undefined'
    ):
        load_cuda(bad, ["k"], arch="9.0a")


@pytest.mark.parametrize(
    "options, named",
    [
        (("-O3", "-Xcompiler=-fplugin=/tmp/evil.so"), "loads a compiler plugin"),
        (("-O3", "-ccbin", "/tmp/fake-gcc"), "chooses the host compiler"),
        (("-O3", "`touch /tmp/kp-native-marker`"), "shell metacharacter"),
        ("-O3", "list of strings"),
    ],
)
def test_refused_option_raises_before_nvcc_runs(tmp_path, monkeypatch, options, named):
    from kernelproof.compiler_flags import RefusedFlagError

    monkeypatch.setenv("KERNELPROOF_NATIVE_DIR", str(tmp_path))
    monkeypatch.setattr(native.subprocess, "run", lambda *a, **k: pytest.fail("nvcc must not run"))
    with pytest.raises(RefusedFlagError, match=named):
        load_cuda(SRC, ["saxpy"], options=options, arch="9.0a")
    assert named in native.records()[-1]["refused"]
    assert list(tmp_path.iterdir()) == []


def test_architecture_that_is_not_a_version_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELPROOF_NATIVE_DIR", str(tmp_path))
    with pytest.raises(NativeCompileError, match="not of the form"):
        load_cuda(SRC, ["saxpy"], arch="90 -ccbin=/tmp/x")


def test_unknown_kernel_attribute_lists_the_loaded_ones(tmp_path):
    mod = native.NativeModule(tmp_path / "x.cubin", {"saxpy": parse_signature(SRC, "saxpy")})
    with pytest.raises(AttributeError, match="loaded: saxpy"):
        mod.sxapy  # noqa: B018


# -- on the GPU ---------------------------------------------------------------------------------
@pytest.mark.gpu
def test_launch_matches_torch_on_the_current_stream(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELPROOF_NATIVE_DIR", str(tmp_path))
    mod = load_cuda(SRC, ["saxpy"])
    x = torch.rand(100_003, device="cuda")
    y = torch.rand(100_003, device="cuda")
    expected = 2.0 * x + y
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        torch.cuda._sleep(50_000_000)  # keeps the stream busy: a launch elsewhere would race ahead
        mod.saxpy(grid=((x.numel() + 255) // 256,), block=(256,), args=(x, y, x.numel(), 2.0))
        y2 = y.clone()
    side.synchronize()
    torch.testing.assert_close(y2, expected)


@pytest.mark.gpu
def test_large_dynamic_shared_memory_is_opted_in(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELPROOF_NATIVE_DIR", str(tmp_path))
    src = r"""extern "C" __global__ void k(float* out) {
        extern __shared__ float buf[]; buf[threadIdx.x] = threadIdx.x; __syncthreads(); out[threadIdx.x] = buf[threadIdx.x]; }"""
    out = torch.zeros(128, device="cuda")
    load_cuda(src, ["k"]).k(grid=(1,), block=(128,), args=(out,), shared_mem=96 * 1024)
    torch.testing.assert_close(out, torch.arange(128, device="cuda", dtype=torch.float32))


@pytest.mark.gpu
def test_example_solution_computes_the_task(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELPROOF_NATIVE_DIR", str(tmp_path))
    spec = importlib.util.spec_from_file_location(
        "native_example", REPO / "examples" / "native" / "scaled_add.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    model = mod.ModelNew(0.5)
    for n in (4096, 1_000_003, 1 << 24):
        x, y = torch.rand(n, device="cuda"), torch.rand(n, device="cuda")
        torch.testing.assert_close(model(x, y), x + 0.5 * y)


# -- a worker's load_cuda after import: a build request the parent serves --------------------------
@needs_nvcc
def test_in_a_worker_a_missing_cubin_is_asked_of_the_parent_and_loaded_from_where_it_lands(
    tmp_path, monkeypatch
):
    from kernelproof.build import inline

    monkeypatch.setenv("KERNELPROOF_NATIVE_DIR", str(tmp_path / "ro"))
    asked = []

    def parent(call, args):
        """The parent's side: the builder compiles the request's arguments (here, in this process)."""
        asked.append((call, args))
        monkeypatch.setitem(inline._state, "requester", None)
        try:
            native.compile_cubin(args["source"], args["arch"], args["options"])
        finally:
            monkeypatch.setitem(inline._state, "requester", parent)
        return {"op": "built", "ok": True, "message": ""}

    monkeypatch.setitem(inline._state, "requester", parent)
    mod = load_cuda(SRC, ["saxpy"], options=("-O3",), arch="9.0a")
    assert asked == [("load_cuda", {"source": SRC, "options": ["-O3"], "arch": "9.0a"})]
    assert mod.cubin.parent == tmp_path / "ro" and native.records()[-1]["requested"] is True
    again = load_cuda(SRC, ["fill"], options=("-O3",), arch="9.0a")
    assert again.cubin == mod.cubin and len(asked) == 1  # there now: nothing asked


def test_in_a_worker_a_refused_request_is_the_solutions_compile_error(tmp_path, monkeypatch):
    from kernelproof.build import inline, toolenv

    monkeypatch.setenv("KERNELPROOF_NATIVE_DIR", str(tmp_path / "ro"))
    monkeypatch.setattr(toolenv, "environ", lambda: {"PATH": "/nonexistent"})
    monkeypatch.setattr("kernelproof.build.env.nvcc_path", lambda env: "/bin/true")
    monkeypatch.setattr("kernelproof.build.env._first_line", lambda cmd, last=False: "nvcc 12")
    monkeypatch.setattr(native.subprocess, "run", lambda *a, **k: pytest.fail("no compiler runs in a worker"))
    refusal = {"op": "built", "ok": False, "message": "the build was refused: timing has started"}
    monkeypatch.setitem(inline._state, "requester", lambda call, args: refusal)
    with pytest.raises(NativeCompileError, match="timing has started"):
        load_cuda(SRC, ["saxpy"], arch="9.0a")
