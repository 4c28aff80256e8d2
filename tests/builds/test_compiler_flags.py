"""The compiler-flag allowlist: what a solution may pass, what is refused and why, read statically too."""

from __future__ import annotations

import os

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
        ("extra_cuda_cflags", "-arch=sm_80;id", "shell metacharacter ';'"),
        ("extra_cuda_cflags", "-arch=native", "not a GPU target"),
        ("extra_cuda_cflags", "-Xcompiler -fopenmp=/tmp/libevil.so", "not on the allowlist of C++"),
        ("extra_cflags", "-march=`id`", "shell metacharacter '`'"),
        ("extra_cflags", "-mllvm", "not on the allowlist of C++"),
        ("extra_cuda_cflags", "--default-stream per-thread", "not on the allowlist of nvcc flags"),
        ("extra_cuda_cflags", "-Xptxas --output-file=/tmp/x", "ptxas option"),
        ("extra_ldflags", "-Wl,-rpath,/tmp", "carries a path"),
        ("extra_ldflags", "-Xlinker -rpath=/tmp", "passes options to the linker"),
        ("extra_ldflags", "-L/tmp", "library path outside the staging directory"),
        ("extra_include_paths", "/tmp", "include path outside the staging directory"),
        ("extra_include_paths", "$(touch /tmp/kp-marker)", "shell metacharacter '$'"),
        ("options", '-DX="1"', "shell metacharacter '\"'"),
        ("extra_cflags", "-fopt-info-vec=/tmp/report.txt", "not on the allowlist of C++"),  # writes a file
        ("extra_cflags", "-fprofile-generate", "not on the allowlist of C++"),
        ("extra_cflags", "-fprofile-use=/tmp/prof", "not on the allowlist of C++"),
        ("extra_cflags", "-fsanitize=address", "not on the allowlist of C++"),
        ("extra_cuda_cflags", "--threads /tmp", "not on the allowlist of nvcc flags"),
    ],
)
def test_refused_flag_is_named_with_its_reason(argument, flag, reason):
    with pytest.raises(RefusedFlagError) as raised:
        check(argument, [flag])
    assert reason in raised.value.refusal.reason
    assert argument in str(raised.value)
    assert raised.value.refusal.flag in flag and raised.value.refusal.flag
    assert "docs/builds.md#what-a-solution-may-pass-to-the-compilers" in str(raised.value)


@pytest.mark.parametrize(
    "argument, flags",
    [
        ("extra_cflags", ["-O3", "-fopenmp"]),
        ("extra_cuda_cflags", ["-Xcompiler", "-fopenmp", "-Xcompiler=-fopenmp,-O3"]),
        ("extra_ldflags", ["-fopenmp", "-lgomp"]),
        ("extra_cflags", ["-march=native", "-mtune=native", "-mavx2", "-mfma", "-mavx512f", "-mno-avx512f"]),
        ("extra_cflags", ["-msse4.2", "-mf16c", "-mprefer-vector-width=512", "-mcpu=neoverse-v2"]),
        ("extra_cuda_cflags", ["-Xcompiler", "-march=native"]),
        ("extra_cuda_cflags", ["-Xptxas", "--maxrregcount=128", "-Xptxas=-maxrregcount=64,-v"]),
        (
            "extra_cuda_cflags",
            ["--ptxas-options=-O3,--def-load-cache=ca,--allow-expensive-optimizations=true"],
        ),
        ("extra_cuda_cflags", ["-Xptxas -warn-spills", "--maxrregcount=255", "-Xptxas=-lineinfo"]),
        ("extra_cuda_cflags", ["-arch=sm_80", "-gencode", "arch=compute_70,code=sm_70"]),
        ("extra_cuda_cflags", ["-gencode=arch=compute_80,code=compute_80", "--gpu-architecture=sm_75"]),
        ("extra_cuda_cflags", ["-arch=sm_100a", "-code=sm_90a,compute_90a"]),
        # CPU extensions: the vectorising and floating-point switches published OpenMP kernels pass
        ("extra_cflags", ["-O3", "-march=native", "-ffast-math", "-ftree-vectorize", "-funroll-all-loops"]),
        (
            "extra_cflags",
            ["-fno-trapping-math", "-ffp-contract=fast", "-fomit-frame-pointer", "-fopt-info-vec"],
        ),
        ("extra_cflags", ["-pthread", "-fno-exceptions", "-fvect-cost-model=unlimited"]),
        ("extra_ldflags", ["-pthread", "-lpthread", "-Wl,-O1"]),
        (
            "extra_cuda_cflags",
            ["--restrict", "--extra-device-vectorization", "--threads", "4", "-Xcompiler", "-pthread"],
        ),
    ],
)
def test_flags_published_kernels_pass_are_allowed(argument, flags):
    assert first_refusal(argument, flags) is None


def test_a_gpu_target_other_than_hopper_is_noted_not_refused():
    from kernelproof.solution import triage

    src = (
        "from torch.utils.cpp_extension import load_inline\n"
        "m = load_inline('m', '', cuda_sources='', extra_cuda_cflags=['-O3', '-arch=sm_80'])\n"
        "n = load_inline('n', '', cuda_sources='', extra_cuda_cflags=['-gencode', 'arch=compute_90a,code=sm_90a'])\n"
        "o = load_inline('o', '', cuda_sources='', extra_cuda_cflags=['-gencode', 'arch=compute_75,code=sm_75'])\n"
    )
    assert literal_refusals(src) == []
    notes = [(n.line, n.flag) for n in compiler_flags.literal_notes(src)]
    assert notes == [(2, "-arch=sm_80"), (4, "-gencode=arch=compute_75,code=sm_75")]
    found = [f for f in triage(src).findings if f.kind == "foreign_gpu_target"]
    assert [f.line for f in found] == [2, 4] and "not the device's own" in found[0].message


def test_the_cpu_model_is_part_of_the_build_environment(tmp_path):
    from kernelproof.build.env import cpu_model

    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nmodel name\t: Some CPU 9000\nflags\t\t: sse avx2\n\nprocessor\t: 1\n")
    other = tmp_path / "cpuinfo2"
    other.write_text("processor\t: 0\nmodel name\t: Some CPU 9000\nflags\t\t: sse avx2 avx512f\n")
    assert cpu_model(str(info)).startswith("Some CPU 9000 [")
    assert cpu_model(str(info)) != cpu_model(str(other))  # same model name, other instruction sets


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


def test_torchs_own_include_directories_are_allowed_and_nothing_beside_them():
    """Published solutions pass extra_include_paths=cpp_extension.include_paths(): torch's headers,
    already on every extension's command line."""
    from torch.utils import cpp_extension

    assert first_refusal("extra_include_paths", cpp_extension.include_paths()) is None
    assert first_refusal("extra_cflags", [f"-I{p}" for p in cpp_extension.include_paths()]) is None
    site_packages = os.path.dirname(os.path.dirname(cpp_extension.include_paths()[0]))
    assert first_refusal("extra_include_paths", [site_packages]) is not None  # around them: no
    assert first_refusal("extra_include_paths", ["/usr/include"]) is not None


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
