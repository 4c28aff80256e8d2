"""Precompiled headers: which flags may build one, which one a source wants, one per flag set."""

from __future__ import annotations

import hashlib
import json

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


# -- issue 15, the build path: the shared header is content-addressed, manifested, read-only -------
FAKE_CXX = """#!{python}
# Stands in for g++: answers --version, writes the -o target from the header's text, counts its runs.
import sys
if "--version" in sys.argv:
    print("fake-c++ 1.0")
    sys.exit(0)
open({count!r}, "a").write("run\\n")
out = sys.argv[sys.argv.index("-o") + 1]
src = next(a for a in sys.argv if a.endswith("kp_torch.h"))
open(out, "w").write("precompiled:" + open(src).read())
"""


@pytest.fixture
def fake_compiler(tmp_path, monkeypatch):
    """torch's flags and the compiler are faked: what is tested is who builds the header, how, and
    what is checked before a build gets a copy (a real header takes 40 s of g++ here)."""
    import sys

    count = tmp_path / "compiles.txt"
    cxx = tmp_path / "fake-cxx"
    cxx.write_text(FAKE_CXX.format(python=sys.executable, count=str(count)))
    cxx.chmod(0o755)
    torch_cflags = ["-O3 -DKP=1"]  # a test may change what "torch" passes

    def fake_vars(extra_cflags=None, **_):
        return {
            "cxx": str(cxx),
            "cflags": " ".join(torch_cflags + list(extra_cflags or [])),
            "post_cflags": "",
        }

    monkeypatch.setattr(pch, "torch_build_vars", fake_vars)

    def compiles():
        return len(count.read_text().splitlines()) if count.exists() else 0

    return compiles, torch_cflags


def test_header_is_built_without_a_shell_with_a_manifest_and_read_only_files(tmp_path, fake_compiler):
    compiles, torch_cflags = fake_compiler
    marker = tmp_path / "marker"
    torch_cflags.append(f"-DKP_SHELL=1;touch {marker}")
    built = pch.ensure_pch(tmp_path / "cache", [])
    assert compiles() == 1
    assert not marker.exists()  # ";touch ..." reached the compiler as an argument, not a shell
    manifest = json.loads((built / pch.MANIFEST).read_text())
    assert sorted(manifest["files"]) == sorted(["flags.txt", pch.PCH_HEADER, pch.PCH_HEADER + ".gch"])
    for name, f in manifest["files"].items():
        assert hashlib.sha256((built / name).read_bytes()).hexdigest() == f["sha256"]
        assert (built / name).stat().st_mode & 0o222 == 0
    assert built.stat().st_mode & 0o222 == 0
    assert pch.ensure_pch(tmp_path / "cache", [""]) == built and compiles() == 1


def test_poisoned_header_is_ignored_and_rebuilt(tmp_path, fake_compiler):
    """Issue 15: a build rewrote <cache>/pch/*/kp_torch.h, and a later honest build used it."""
    compiles, _ = fake_compiler
    built = pch.ensure_pch(tmp_path / "cache", [])
    poisoned = built / "kp_torch.h"
    poisoned.chmod(0o644)
    poisoned.write_text('__attribute__((constructor)) static void kp_evil() { system("id"); }\n')
    again = pch.ensure_pch(tmp_path / "cache", [])
    assert compiles() == 2 and again == built
    copy = pch.copy_pch(tmp_path / "cache", again.name, tmp_path / "staging" / "pch")
    assert copy is not None and (copy / "kp_torch.h").read_text() == "#include <torch/extension.h>\n"


def test_header_changed_after_this_store_verified_it_is_caught_at_the_next_copy(tmp_path, fake_compiler):
    compiles, _ = fake_compiler
    store = pch.HeaderStore(tmp_path / "cache")
    first = store.provide([], tmp_path / "one")
    assert first is not None and compiles() == 1
    gch = pch.pch_root(tmp_path / "cache") / first.name / (pch.PCH_HEADER + ".gch")
    gch.chmod(0o644)
    gch.write_text("precompiled:planted")
    second = store.provide([], tmp_path / "two")
    assert compiles() == 2
    assert (second / (pch.PCH_HEADER + ".gch")).read_text() == "precompiled:" + pch.HEADER_TEXT


def test_header_directory_without_a_manifest_is_rebuilt(tmp_path, fake_compiler):
    compiles, _ = fake_compiler
    store = pch.HeaderStore(tmp_path / "cache")
    legacy = pch.pch_root(tmp_path / "cache") / store.identity([])
    legacy.mkdir(parents=True)
    (legacy / pch.PCH_HEADER).write_text("#include </tmp/planted.h>\n")
    (legacy / (pch.PCH_HEADER + ".gch")).write_text("planted")
    assert pch.copy_pch(tmp_path / "cache", legacy.name, tmp_path / "staging") is None
    assert store.ensure([]) == legacy and compiles() == 1
    assert (legacy / pch.PCH_HEADER).read_text() == pch.HEADER_TEXT


def test_header_identity_covers_compiler_torch_version_and_header_text(monkeypatch):
    import torch

    v = {"cxx": "c++", "cflags": "-O3", "post_cflags": ""}
    base = pch.pch_id(v)
    assert pch.pch_id(dict(v, cxx="g++-13")) != base
    monkeypatch.setattr(torch, "__version__", "0.0.0-other")
    other_torch = pch.pch_id(v)
    monkeypatch.setattr(pch, "HEADER_TEXT", "#include <torch/all.h>\n")
    assert len({base, other_torch, pch.pch_id(v)}) == 3
