"""The compiler-flag allowlist: what a solution may pass, what is refused and why, read statically too."""

from __future__ import annotations

import pytest

from kernelproof import compiler_flags
from kernelproof.build.env import cuda_home
from kernelproof.compiler_flags import RefusedFlagError, check, first_refusal, literal_refusals


@pytest.mark.parametrize(
    "argument, flags",
    [
        ("extra_cflags", ["-O3", "-DNDEBUG", "-DBLOCK=256", "-std=c++17", "-w", "-Wno-unused-variable"]),
        ("extra_cflags", ["-O2 -fPIC", "-U__CUDA_NO_HALF_OPERATORS__", "-ffast-math", ""]),
        (
            "extra_cuda_cflags",
            ["-O3", "--use_fast_math", "-lineinfo", "-arch=sm_90a", "--expt-relaxed-constexpr"],
        ),
        (
            "extra_cuda_cflags",
            ["-gencode", "arch=compute_90a,code=sm_90a", "-gencode=arch=compute_90,code=sm_90"],
        ),
        ("extra_cuda_cflags", ["-Xptxas=-v", "-Xptxas -O3,-v", "-Xcompiler", "-fPIC", "-maxrregcount=64"]),
        (
            "extra_cuda_cflags",
            ["-use_fast_math", "--ftz=true", "-Xcudafe --diag_suppress=177", "--std=c++17"],
        ),
        ("extra_ldflags", ["-lcublas", "-lcuda", "-Wl,--no-as-needed"]),
        ("options", ("-O3", "--use_fast_math", "-arch=compute_90a")),
        ("extra_include_paths", []),
    ],
)
def test_flags_a_kernel_needs_are_allowed(argument, flags):
    assert first_refusal(argument, flags) is None


@pytest.mark.parametrize(
    "argument, flag, reason",
    [
        ("extra_cflags", "`touch /tmp/kp-marker`", "shell metacharacter '`'"),
        ("extra_cflags", "$(touch /tmp/kp-marker)", "shell metacharacter '$'"),
        ("extra_cflags", "-O3;touch /tmp/kp-marker", "shell metacharacter ';'"),
        ("extra_cflags", "-O3\n-O2", "control character"),
        ("extra_cflags", "-fplugin=/tmp/evil.so", "loads a compiler plugin"),
        ("extra_cflags", "-B/tmp/bin", "programs it runs"),
        ("extra_cflags", "-include /tmp/evil.h", "includes a file into every source"),
        ("extra_cflags", "-I/tmp", "include path outside the staging directory"),
        ("extra_cflags", "-o /tmp/out.o", "sets an output path"),
        ("extra_cflags", "@/tmp/options.rsp", "@file"),
        ("extra_cflags", "-specs=/tmp/evil.specs", "specs file"),
        ("extra_cflags", "-Wp,-include,/tmp/evil.h", "not on the allowlist"),
        ("extra_cuda_cflags", "-ccbin /tmp/fake-gcc", "chooses the host compiler"),
        ("extra_cuda_cflags", "--compiler-bindir=/tmp", "chooses the host compiler"),
        ("extra_cuda_cflags", "-Xcompiler -fplugin=/tmp/evil.so", "loads a compiler plugin"),
        ("extra_cuda_cflags", "-arch=sm_80", "other than Hopper"),
        ("extra_cuda_cflags", "--default-stream per-thread", "not on the allowlist of nvcc flags"),
        ("extra_cuda_cflags", "-Xptxas --output-file=/tmp/x", "ptxas option"),
        ("extra_ldflags", "-Wl,-rpath,/tmp", "carries a path"),
        ("extra_ldflags", "-Xlinker -rpath=/tmp", "passes options to the linker"),
        ("extra_ldflags", "-L/tmp", "library path outside the staging directory"),
        ("extra_include_paths", "/tmp", "include path outside the staging directory"),
        ("extra_include_paths", "$(touch /tmp/kp-marker)", "shell metacharacter '$'"),
        ("options", '-DX="1"', "shell metacharacter '\"'"),
    ],
)
def test_refused_flag_is_named_with_its_reason(argument, flag, reason):
    with pytest.raises(RefusedFlagError) as raised:
        check(argument, [flag])
    assert reason in raised.value.refusal.reason
    assert argument in str(raised.value)
    assert raised.value.refusal.flag in flag and raised.value.refusal.flag


def test_one_string_instead_of_a_list_is_refused():
    assert "list of strings" in first_refusal("extra_cflags", "-O3").reason


def test_include_paths_inside_staging_are_allowed(tmp_path):
    staging = tmp_path / "staging"
    (staging / "tmp" / "inc").mkdir(parents=True)
    assert first_refusal("extra_include_paths", [str(staging / "tmp" / "inc")], staging) is None
    assert (
        first_refusal("extra_cflags", [f"-I{staging}/tmp/inc", "-isystem", f"{staging}/tmp"], staging) is None
    )
    outside = first_refusal("extra_include_paths", [str(staging / ".." / "elsewhere")], staging)
    assert outside is not None and "outside the staging directory" in outside.reason


def test_a_link_out_of_staging_does_not_count_as_inside(tmp_path):
    staging = tmp_path / "staging"
    staging.mkdir()
    (staging / "escape").symlink_to("/etc")
    assert first_refusal("extra_include_paths", [str(staging / "escape")], staging) is not None


@pytest.mark.skipif(cuda_home() is None, reason="needs a CUDA toolkit")
def test_the_toolkits_own_include_and_library_directories_are_allowed():
    home = cuda_home()
    assert first_refusal("extra_include_paths", [f"{home}/include"]) is None
    assert first_refusal("extra_ldflags", [f"-L{home}/lib64", "-lcublas"]) is None


def test_toolkit_search_matches_the_build_environments():
    assert compiler_flags._toolkit_home() == cuda_home()


def test_extension_names_must_be_identifiers():
    compiler_flags.check_name("kp_add")
    with pytest.raises(RefusedFlagError, match="C identifier"):
        compiler_flags.check_name("x`touch /tmp/kp-marker`")


def test_literal_flags_of_every_build_call_are_read_statically():
    src = """
import torch.utils.cpp_extension as ce
from torch.utils.cpp_extension import load_inline as li, load
from kernelproof.native import load_cuda
FLAGS = ["-O3", "`touch /tmp/kp-marker`"]
PLUGIN = "-fplugin=x.so"
a = li("a", "", extra_cflags=FLAGS)
b = li("b", "", "", None, ["-O3"], ["-O3", PLUGIN])
c = load_cuda("", ["k"], ("-O3", "$(id)"))
d = ce.load("d", ["d.cu"], extra_ldflags=["-L/etc"])
e = load("e", ["e.cu"], extra_include_paths=["/tmp"])
f = li("f", "", extra_cflags=["-O3"])
"""
    found = [(r.line, r.argument, r.flag) for r in literal_refusals(src)]
    assert found == [
        (7, "extra_cflags", "`touch /tmp/kp-marker`"),
        (8, "extra_cuda_cflags", "-fplugin=x.so"),
        (9, "options", "$(id)"),
        (10, "extra_ldflags", "-L/etc"),
        (11, "extra_include_paths", "/tmp"),
    ]


def test_computed_flags_are_left_to_the_builder():
    src = """
from torch.utils.cpp_extension import load_inline
FLAGS = ["`" + "id" + "`"]
m = load_inline("m", "", extra_cflags=FLAGS)
flags = ["-O3"]
flags = ["`id`"]
n = load_inline("n", "", extra_cflags=flags)
"""
    assert literal_refusals(src) == []


def test_triage_reports_a_refused_literal_flag_with_its_line():
    from kernelproof.solution import triage

    src = "from torch.utils.cpp_extension import load_inline\nm = load_inline('m', '', extra_cflags=['-fplugin=x.so'])\n"
    found = [f for f in triage(src).findings if f.kind == "refused_flag"]
    assert len(found) == 1 and found[0].line == 2 and "-fplugin=x.so" in found[0].message
