"""Precompiled headers: which flags may build one, which one a source wants, one per flag set."""

from __future__ import annotations

import pytest

from kernelproof.build import pch
from kernelproof.build.env import nvcc_path


def test_reads_the_literal_extra_cflags_of_each_load_inline_call():
    src = (
        "from torch.utils.cpp_extension import load_inline\n"
        "a = load_inline(name='a', cpp_sources='', cuda_sources='', extra_cflags=['-O3', ''])\n"
        "b = load_inline(name='b', cpp_sources='', cuda_sources='')\n"
        "c = load_inline(name='c', cpp_sources='', extra_cflags=FLAGS)\n"
    )
    assert pch.guess_extra_cflags(src) == [["-O3"], []]


def test_unparsable_source_wants_no_header():
    assert pch.guess_extra_cflags("def (:") == []


@pytest.mark.parametrize("flags", [[], [""], ["-O3"], ["-O2", "-DNDEBUG"], ["-std=c++17", "-w"]])
def test_common_flags_may_build_a_header(flags):
    assert pch.flags_allowed(flags)


@pytest.mark.parametrize(
    "flags",
    [["-fplugin=/tmp/evil.so"], ["-include", "/tmp/x.h"], ["-B/tmp"], ["-O3", "-I/tmp"], ["--param=x"]],
)
def test_flags_that_could_run_or_inject_code_may_not(flags):
    assert not pch.flags_allowed(flags)


def test_header_identity_ignores_the_extension_name_but_not_the_flags():
    a = {"cxx": "c++", "cflags": "-DTORCH_EXTENSION_NAME=one -isystem /t -fPIC -std=c++20", "post_cflags": ""}
    b = dict(a, cflags="-DTORCH_EXTENSION_NAME=two -isystem /t  -fPIC -std=c++20")
    c = dict(a, cflags="-DTORCH_EXTENSION_NAME=one -isystem /t -fPIC -std=c++20 -O3")
    assert pch.pch_id(a) == pch.pch_id(b) != pch.pch_id(c)


def test_ninja_variables_are_read_and_rules_kept_in_the_header():
    text = "ninja_required_version = 1.3\ncxx = c++\ncflags = -O3 -fPIC\n\nrule compile\n  command = $cxx $cflags\n\nbuild a.o: compile a.cpp\n"
    v = pch.parse_ninja_vars(text)
    assert v["cxx"] == "c++" and v["cflags"] == "-O3 -fPIC"
    assert "rule compile" in v["_header"] and "build a.o" not in v["_header"]


def test_copy_of_a_missing_header_is_none(tmp_path):
    assert pch.copy_pch(tmp_path, "0" * 24, tmp_path / "dest") is None


@pytest.mark.slow
@pytest.mark.skipif(nvcc_path() is None, reason="needs a CUDA toolkit for torch's include paths")
def test_header_is_built_once_and_copied_privately(tmp_path, monkeypatch):
    from torch.utils import cpp_extension as ce

    from kernelproof.build.env import cuda_home

    monkeypatch.setattr(ce, "CUDA_HOME", cuda_home())
    first = pch.ensure_pch(tmp_path / "cache", [])
    assert (first / (pch.PCH_HEADER + ".gch")).stat().st_size > 1 << 20
    assert pch.ensure_pch(tmp_path / "cache", [""]) == first
    copy = pch.copy_pch(tmp_path / "cache", first.name, tmp_path / "private")
    assert copy != first and (copy / (pch.PCH_HEADER + ".gch")).is_file()
    assert pch.ensure_pch(tmp_path / "cache", ["-fplugin=x.so"]) is None


@pytest.mark.skipif(nvcc_path() is None, reason="needs a CUDA toolkit for torch's include paths")
def test_torch_build_vars_match_torchs_own_link_line(monkeypatch):
    from torch.utils import cpp_extension as ce

    from kernelproof.build.env import cuda_home

    monkeypatch.setattr(ce, "CUDA_HOME", cuda_home())
    v = pch.torch_build_vars(extra_cflags=["-O3"], extra_cuda_cflags=["-arch=sm_90"], name="probe")
    assert "-DTORCH_EXTENSION_NAME=probe" in v["cflags"] and "-O3" in v["cflags"]
    for lib in ("-lc10", "-ltorch_cpu", "-ltorch_python", "-lcudart"):
        assert lib in v["ldflags"].split()
    assert "-arch=sm_90" in v["cuda_cflags"]
