"""The load_inline hook: prebuilt modules load without a build, refusals fall back to torch unchanged."""

from __future__ import annotations

import os
import subprocess
import sysconfig
from pathlib import Path

import pytest
import torch

from kernelproof.build import inline
from kernelproof.build.env import nvcc_path
from kernelproof.errors import CudaUnavailableError

TEMPLATED = r"""
#include <torch/extension.h>
template <typename T> __global__ void k(T* x) { x[0] = T(1); }
torch::Tensor f(torch::Tensor x) { k<float><<<1, 1>>>(x.data_ptr<float>()); return x; }
"""
TINY_EXT = r"""
#include <Python.h>
static struct PyModuleDef def = {PyModuleDef_HEAD_INIT, "kp_tiny", NULL, -1, NULL};
PyMODINIT_FUNC PyInit_kp_tiny(void) { PyObject *m = PyModule_Create(&def); PyModule_AddIntConstant(m, "answer", 42); return m; }
"""


class FakeTorchLoadInline:
    """Stands in for torch's load_inline: records its arguments instead of compiling."""

    def __init__(self, fail: bool = False):
        self.calls: list[dict] = []
        self.fail = fail

    def __call__(
        self,
        name,
        cpp_sources,
        cuda_sources=None,
        functions=None,
        extra_cflags=None,
        extra_cuda_cflags=None,
        extra_ldflags=None,
        extra_include_paths=None,
        build_directory=None,
        verbose=False,
        with_cuda=None,
        is_python_module=True,
        with_pytorch_error_handling=True,
        keep_intermediates=True,
        use_pch=False,
        no_implicit_headers=False,
    ):
        if self.fail:
            raise AssertionError("torch's load_inline must not run for a prebuilt module")
        self.calls.append(dict(locals()))
        self.environ = {k: os.environ.get(k) for k in ("CXX", "NVCC_APPEND_FLAGS")}  # as torch reads it
        return "module"


@pytest.fixture
def hooked(monkeypatch, tmp_path):
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path / "ext"))
    fake = FakeTorchLoadInline()
    monkeypatch.setitem(inline._state, "original", fake)
    monkeypatch.setitem(inline._state, "records", [])
    monkeypatch.setitem(inline._state, "fast", True)
    # a machine that can build CUDA: the fake stands in for torch's compilers (the machine's facts
    # have their own tests below)
    monkeypatch.setattr(inline._cuda, "lacks", lambda kinds, environ=None: ())
    return fake


def test_a_cuda_build_this_machine_cannot_do_is_refused_and_recorded_compiling_nothing(hooked, monkeypatch):
    monkeypatch.setattr(inline._cuda, "lacks", lambda kinds, environ=None: ("no CUDA toolkit",))
    with pytest.raises(CudaUnavailableError, match="no CUDA toolkit"):
        inline.load_inline("ext", "int f();", "__global__ void k() {}")
    assert hooked.calls == []  # nothing reached a compiler
    rec = inline.records()[0]
    assert rec["cuda"] is True and rec["unavailable"] == "no CUDA toolkit"


def test_a_cpu_extension_asks_for_no_cuda_whatever_its_text(hooked, monkeypatch):
    monkeypatch.setattr(inline._cuda, "lacks", lambda kinds, environ=None: ("no CUDA toolkit",))
    inline.load_inline("ext", "int f(); // __global__ void k(", cuda_sources=[], with_cuda=False)
    assert len(hooked.calls) == 1 and inline.records()[0]["cuda"] is False


def test_refused_split_falls_back_to_torch_with_the_same_arguments(hooked, tmp_path):
    out = inline.load_inline(
        "ext", "torch::Tensor f(torch::Tensor x);", TEMPLATED, functions=["f"], extra_cflags=["-O3"]
    )
    assert out == "module"
    call = hooked.calls[0]
    assert call["cpp_sources"] == ["torch::Tensor f(torch::Tensor x);"]
    assert call["cuda_sources"] == [TEMPLATED] and call["extra_cflags"] == ["-O3"]
    assert call["use_pch"] is False  # torch's header cache lives inside torch's install: never shared
    assert Path(call["build_directory"]).parent == tmp_path / "ext"
    rec = inline.records()[0]
    assert rec["strategy"] == "torch" and "outside what the splitter reads" in rec["fast_refused"]


def test_requested_build_directory_is_redirected_into_the_staging_area(hooked, tmp_path):
    inline.load_inline("ext", "int f();", build_directory="/tmp/elsewhere")
    assert Path(hooked.calls[0]["build_directory"]).parent == tmp_path / "ext"


def test_build_directory_depends_on_every_build_argument(hooked):
    inline.load_inline("ext", "int f();")
    inline.load_inline("ext", "int f();", extra_cflags=["-O3"])
    inline.load_inline("ext", "int g();")
    inline.load_inline("ext", "int f();")
    dirs = [c["build_directory"] for c in hooked.calls]
    assert len(set(dirs[:3])) == 3 and dirs[3] == dirs[0]


def test_prebuilt_module_loads_without_torchs_build(hooked, tmp_path, monkeypatch):
    inline.load_inline("kp_tiny", "int f();")  # learns the directory and stamps it
    build_dir = Path(hooked.calls[0]["build_directory"])
    src = tmp_path / "tiny.c"
    src.write_text(TINY_EXT)
    subprocess.run(
        [
            "cc",
            "-shared",
            "-fPIC",
            f"-I{sysconfig.get_paths()['include']}",
            str(src),
            "-o",
            str(build_dir / "kp_tiny.so"),
        ],
        check=True,
    )
    monkeypatch.setitem(inline._state, "original", FakeTorchLoadInline(fail=True))
    module = inline.load_inline("kp_tiny", "int f();")
    assert module.answer == 42
    assert inline.records()[-1]["strategy"] == "prebuilt"


def test_install_replaces_and_uninstall_restores_torchs_function():
    from torch.utils import cpp_extension as ce

    before = ce.load_inline
    inline.install()
    try:
        assert ce.load_inline is inline.load_inline
    finally:
        inline.uninstall()
    assert ce.load_inline is before


@pytest.mark.slow
@pytest.mark.skipif(nvcc_path() is None, reason="needs nvcc")
def test_split_build_compiles_kernelbench_add_without_torch_in_nvcc(tmp_path, monkeypatch):
    """Real compiles (30-150 s on 2 cores). On a CPU-only torch the link needs stub CUDA libraries
    and the import fails; the build itself is what is checked."""
    from test_split import ADD
    from torch.utils import cpp_extension as ce

    from kernelproof.build.env import cuda_home

    stubs = tmp_path / "stubs"
    stubs.mkdir()
    (stubs / "empty.c").write_text("")
    for lib in ("c10_cuda", "torch_cuda"):  # absent from a CPU-only torch; only the link needs them
        subprocess.run(
            ["cc", "-shared", str(stubs / "empty.c"), "-o", str(stubs / f"lib{lib}.so")], check=True
        )
    monkeypatch.setenv("LIBRARY_PATH", str(stubs))
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path / "ext"))
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "9.0a")
    monkeypatch.setattr(ce, "CUDA_HOME", cuda_home())
    monkeypatch.setitem(inline._state, "original", ce.load_inline)
    monkeypatch.setitem(inline._state, "records", [])
    monkeypatch.setitem(inline._state, "fast", True)
    try:
        inline.load_inline(
            "kp_add",
            "torch::Tensor elementwise_add_cuda(torch::Tensor a, torch::Tensor b);",
            ADD,
            functions=["elementwise_add_cuda"],
        )
    except ImportError:
        assert not torch.cuda.is_available()  # CPU torch: the extension cannot load here
    rec = inline.records()[-1]
    assert rec["strategy"] == "split", rec
    assert (Path(rec["build_dir"]) / "kp_add.so").is_file()
    assert "torch" not in (Path(rec["build_dir"]) / "kernels.cu").read_text()
    needed = subprocess.run(
        ["readelf", "-d", str(Path(rec["build_dir"]) / "kp_add.so")], capture_output=True, text=True
    )
    assert "libtorch_cpu.so" in needed.stdout and "libcudart" in needed.stdout  # linked like torch links it


@pytest.mark.gpu
def test_kernelbench_add_builds_split_and_computes(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path / "ext"))
    monkeypatch.setitem(inline._state, "records", [])
    from test_split import ADD

    inline.install()
    try:
        mod = inline.load_inline(
            "kp_add",
            "torch::Tensor elementwise_add_cuda(torch::Tensor a, torch::Tensor b);",
            ADD,
            functions=["elementwise_add_cuda"],
        )
    finally:
        inline.uninstall()
    a, b = torch.rand(1000, device="cuda"), torch.rand(1000, device="cuda")
    torch.testing.assert_close(mod.elementwise_add_cuda(a, b), a + b)
    assert inline.records()[-1]["strategy"] in ("split", "split+pch")


# -- issue 15, the build path ----------------------------------------------------------------------
def test_refused_flag_raises_before_torchs_build_and_is_recorded(hooked, monkeypatch):
    from kernelproof.compiler_flags import RefusedFlagError

    monkeypatch.setitem(inline._state, "original", FakeTorchLoadInline(fail=True))
    with pytest.raises(RefusedFlagError, match="loads a compiler plugin"):
        inline.load_inline("ext", "int f();", extra_cflags=["-O3", "-fplugin=/tmp/evil.so"])
    with pytest.raises(RefusedFlagError, match="C identifier"):
        inline.load_inline("ext;id", "int f();")
    refused = [r["refused"] for r in inline.records()]
    assert "-fplugin=/tmp/evil.so" in refused[0] and "ext;id" in refused[1]


def test_cpp_extension_load_is_checked_and_built_as_load_inline_of_its_files(hooked, monkeypatch, tmp_path):
    from kernelproof.compiler_flags import RefusedFlagError

    calls, requests = [], []

    def fake_load_checked(a, original, request):
        calls.append(a)
        requests.append(request)
        return "module"

    monkeypatch.setattr(inline, "_load_checked", fake_load_checked)
    with pytest.raises(RefusedFlagError, match="shell metacharacter"):
        inline.load("ext", [str(tmp_path / "a`id`.cu")])
    with pytest.raises(RefusedFlagError, match="outside the staging directory"):
        inline.load("ext", [str(tmp_path / "a.cu")], extra_include_paths=["/etc"])
    assert calls == []
    (tmp_path / "a.cu").write_text("// kernel")
    (tmp_path / "b.cpp").write_text("// binding")
    assert (
        inline.load("ext", [str(tmp_path / "a.cu"), str(tmp_path / "b.cpp")], build_directory="/x")
        == "module"
    )
    # load_inline builds under TORCH_EXTENSIONS_DIR whatever build_directory was asked for
    assert calls[0]["cuda_sources"] == ["// kernel"] and calls[0]["cpp_sources"] == ["// binding"]
    assert calls[0]["build_directory"] is None and calls[0]["name"] == "ext"
    # in a worker the request names the files, which the parent reads itself
    call, args = requests[0]
    assert call == "load" and args["sources"] == [str(tmp_path / "a.cu"), str(tmp_path / "b.cpp")]


def test_torchs_build_runs_with_the_environment_pinned_before_the_import(hooked, monkeypatch, tmp_path):
    from kernelproof.build import toolenv

    monkeypatch.setenv("CXX", "g++")
    monkeypatch.delenv("NVCC_APPEND_FLAGS", raising=False)
    toolenv.pin(str(tmp_path))
    try:
        os.environ["CXX"] = "touch /tmp/kp-marker; c++"  # what a solution does at import
        os.environ["NVCC_APPEND_FLAGS"] = "-ccbin /tmp/fake"
        assert inline.load_inline("ext", "int f();") == "module"
        assert hooked.environ == {"CXX": "g++", "NVCC_APPEND_FLAGS": None}
        assert toolenv.environ()["CXX"] == "g++" and "NVCC_APPEND_FLAGS" not in toolenv.environ()
        assert os.environ["CXX"] == "touch /tmp/kp-marker; c++"  # the solution's own view is left alone
    finally:
        toolenv.unpin()
        os.environ.pop("NVCC_APPEND_FLAGS", None)


@pytest.mark.skipif(nvcc_path() is None, reason="needs a CUDA toolkit for torch's build flags")
def test_fast_build_commands_are_argument_lists_expanded_from_torchs_rules(monkeypatch):
    from torch.utils import cpp_extension as ce

    from kernelproof.build import pch
    from kernelproof.build.env import cuda_home

    monkeypatch.setattr(ce, "CUDA_HOME", cuda_home())
    v = pch.torch_build_vars(extra_cflags=["-O3"], extra_cuda_cflags=["-arch=sm_90a"], name="probe")
    rules = pch.ninja_rules(v["_header"])
    compile_ = inline._argv(rules["compile"], v, ["/b/main.cpp"], "/b/main.o")
    assert compile_[0] == v["cxx"] and "-O3" in compile_
    assert compile_[compile_.index("-c") : compile_.index("-c") + 4] == [
        "-c",
        "/b/main.cpp",
        "-o",
        "/b/main.o",
    ]
    assert "-DTORCH_EXTENSION_NAME=probe" in compile_
    cuda = inline._argv(rules["cuda_compile"], v, ["/b/k.cu"], "/b/k.o")
    assert "--compiler-options" in cuda and "-fPIC" in cuda  # torch's '-fPIC' quoting, unquoted as sh would
    link = inline._argv(rules["link"], v, ["/b/a.o", "/b/b.o"], "/b/x.so")
    assert link[1:3] == ["/b/a.o", "/b/b.o"] and link[-2:] == ["-o", "/b/x.so"]
    with pytest.raises(inline._NoFast, match="shell"):
        inline._argv("$cxx $cflags", dict(v, cflags="-O3 `id`"), [], "x")
