"""build_solution: the child process, its scrubbed environment, its timeout, its trimmed log."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest
from running_deadline import WRITE_MARKER, count_from_marker

from kernelproof.build.builder import BuildOptions, build_solution, trim_log
from kernelproof.build.env import nvcc_path
from kernelproof.host import members

HAVE_NVCC = nvcc_path() is not None

CPU = BuildOptions(arch="")
# For tests whose solution must write outside its staging directory or start a process (to be
# observed): the guards would rightly stop it.
CPU_UNGUARDED = BuildOptions(arch="", guard=False)


def _write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def test_plain_solution_builds(tmp_path):
    sol = _write(tmp_path, "ok.py", "import torch.nn as nn\nclass ModelNew(nn.Module):\n    pass\n")
    result = build_solution(sol, tmp_path / "staging", "cpu", 120, CPU)
    assert result.ok and not result.timed_out and result.log == ""
    assert result.backend == "torch"


def test_import_error_returns_failed_result_with_its_line(tmp_path):
    sol = _write(tmp_path, "bad.py", "import torch\nx = 1\nraise RuntimeError('kernel table is empty')\n")
    result = build_solution(sol, tmp_path / "staging", "cpu", 120, CPU)
    assert not result.ok
    assert "RuntimeError: kernel table is empty" in result.log
    assert "line 3" in result.log


def test_build_that_never_ends_is_killed_by_the_timeout(tmp_path, monkeypatch):
    count_from_marker(monkeypatch)  # the 3 s start once the solution runs: torch's import is not in them
    marker = tmp_path / "staging" / "home" / "grandchild.pid"  # $HOME: the builder writes only in staging
    sol = _write(
        tmp_path,
        "hang.py",
        "import os, subprocess\n"
        "p = subprocess.Popen(['sleep', '300'])\n"
        "open(os.path.join(os.environ['HOME'], 'grandchild.pid'), 'w').write(str(p.pid))\n"
        + WRITE_MARKER
        + "while True:\n    pass\n",
    )
    result = build_solution(sol, tmp_path / "staging", "cpu", 3, CPU_UNGUARDED)
    assert result.timed_out and not result.ok
    assert "did not finish in 3 s" in result.log
    pid = int(marker.read_text())
    assert members.state(pid) in ("", "Z", "X")  # gone (or only a zombie) when the build returns


def test_builder_sees_only_its_staging_directories(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELPROOF_CACHE_DIR", str(tmp_path / "shared-cache"))
    monkeypatch.setenv("OPENAI_API_KEY", "secret")
    staging = tmp_path / "staging"
    dump = staging / "home" / "env.json"  # $HOME: the builder writes only in staging
    sol = _write(
        tmp_path,
        "env.py",
        "import json, os\njson.dump(dict(os.environ), open(os.environ['HOME'] + '/env.json', 'w'))\n",
    )
    assert build_solution(sol, staging, "cpu", 120, BuildOptions(arch="9.0a", guard=False)).ok
    env = json.loads(dump.read_text())
    assert "KERNELPROOF_CACHE_DIR" not in env and "OPENAI_API_KEY" not in env
    assert env["TORCH_EXTENSIONS_DIR"].startswith(str(staging.resolve()))
    assert env["TRITON_CACHE_DIR"].startswith(str(staging.resolve()))
    assert env["TORCH_CUDA_ARCH_LIST"] == "9.0a"
    assert env["CUDA_VISIBLE_DEVICES"] == ""


@pytest.mark.skipif(not HAVE_NVCC, reason="needs nvcc")
def test_compile_error_returns_the_compilers_error_line(tmp_path):
    sol = _write(
        tmp_path,
        "broken_native.py",
        "from kernelproof.native import load_cuda\n"
        "SRC = r'''extern \"C\" __global__ void k(float* x) { x[0] = undefined_name; }'''\n"
        "mod = load_cuda(SRC, ['k'])\n",
    )
    result = build_solution(sol, tmp_path / "staging", "cuda", 120, BuildOptions(arch="9.0a"))
    assert not result.ok and result.backend == "native"
    assert 'identifier "undefined_name" is undefined' in result.log


def test_trim_log_keeps_compiler_errors_verbatim_and_drops_noise():
    log = "\n".join(
        [
            "[1/3] /usr/local/cuda/bin/nvcc -c cuda.cu -o cuda.cuda.o",
            "FAILED: cuda.cuda.o",
            'cuda.cu(12): error: identifier "blockIdx_x" is undefined',
            '1 error detected in the compilation of "cuda.cu".',
            "ninja: build stopped: subcommand failed.",
            "Traceback (most recent call last):",
            '  File "sol.py", line 30, in <module>',
            "RuntimeError: Error building extension 'add'",
        ]
    )
    trimmed = trim_log(log)
    assert 'cuda.cu(12): error: identifier "blockIdx_x" is undefined' in trimmed.splitlines()
    assert "RuntimeError: Error building extension 'add'" in trimmed
    assert "[1/3]" not in trimmed


def _outside_the_temporary_folders() -> Path:
    """A folder the parent could write and a builder must not: under the home directory (the
    builder's /tmp, /var/tmp and /dev/shm are its own, so a path there is no longer shared)."""
    import uuid

    return Path.home() / ".cache" / f"kp-test-planted-{uuid.uuid4().hex[:12]}"


def test_write_outside_staging_during_the_build_is_a_violation(tmp_path):
    shared = _outside_the_temporary_folders()
    target = shared / "entries" / "planted.so"
    in_tmp = tmp_path / "shared-cache" / "planted.so"  # the real /tmp: the builder's is its own
    sol = _write(
        tmp_path,
        "plant.py",
        "import os, pathlib\n"
        f"try:\n    pathlib.Path({str(in_tmp.parent)!r}).mkdir(parents=True, exist_ok=True)\n"
        f"    open({str(in_tmp)!r}, 'wb').write(b'x')\nexcept OSError:\n    pass\n"
        f"os.makedirs({str(target.parent)!r}, exist_ok=True)\nopen({str(target)!r}, 'wb').write(b'x')\n",
    )
    try:
        result = build_solution(sol, tmp_path / "staging", "cpu", 120, CPU)
        assert not result.ok
        assert "outside the worker's private directory" in result.violation
        assert not target.exists() and not in_tmp.exists()
    finally:
        shutil.rmtree(shared, ignore_errors=True)


# -- issue 15, the build path: flags computed at run time are checked in the builder -------------
RUNTIME_FLAGS = """
import json
import torch.nn as nn
from torch.utils.cpp_extension import load_inline
from kernelproof.native import load_cuda

CPP = "int kp_answer() {{ return 42; }}"
CU = "__global__ void kp_fill(float* x) {{ x[0] = 1.0f; }}"
CASES = json.loads({cases!r})  # (argument, flag) pairs: nothing the parent can read as a literal
for i, (argument, flag) in enumerate(CASES):
    try:
        load_inline(name=f"kp_case{{i}}", cpp_sources=CPP, cuda_sources=CU, no_implicit_headers=True,
                    **{{argument: [flag]}})
    except Exception:  # a solution that swallows the refusal still fails its build
        pass
try:
    load_cuda('extern "C" __global__ void k(float* x) {{}}', ["k"], options=("-O3", "-Xcompiler=-fplugin=" + "x.so"))
except Exception:
    pass

class ModelNew(nn.Module):
    pass
"""


def test_flags_computed_at_run_time_are_refused_in_the_builder_and_nothing_runs(tmp_path):
    import json as _json

    marker = tmp_path / "marker"
    cases = [
        (argument, form.format(marker=marker))
        for argument in ("extra_cflags", "extra_cuda_cflags", "extra_ldflags", "extra_include_paths")
        for form in ("`touch {marker}`", "$(touch {marker})", "$$(touch {marker})")
    ] + [("extra_cflags", f"-fplugin={tmp_path / 'evil.so'}")]
    sol = _write(tmp_path, "runtime.py", RUNTIME_FLAGS.format(cases=_json.dumps(cases)))
    staging = tmp_path / "staging"
    result = build_solution(sol, staging, "cpu", 120, BuildOptions(arch="9.0a"))
    assert not result.ok
    assert result.log.splitlines()[-1].startswith(f"extra_cflags entry '`touch {marker}`' refused")
    account = _json.loads((staging / "result.json").read_text())
    refused = [r["refused"] for r in account["inline"]]
    assert len(refused) == len(cases)
    for (argument, flag), message in zip(cases, refused, strict=True):
        assert f"{argument} entry {flag!r} refused" in message
    assert "-fplugin=x.so" in account["native"][0]["refused"]
    assert not marker.exists()
    assert not list((staging / "out").rglob("*.o"))  # nothing was compiled


# torch writes $CXX into build.ninja as the compiler, and ninja runs it through /bin/sh.
CXX_FROM_ENV = '''
import os
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

os.environ["CXX"] = "touch {marker}; c++"
TINY = r"""
#include <Python.h>
static struct PyModuleDef def = {{PyModuleDef_HEAD_INIT, "kp_tiny_env", NULL, -1, NULL}};
PyMODINIT_FUNC PyInit_kp_tiny_env(void) {{ return PyModule_Create(&def); }}
"""
ext = load_inline(name="kp_tiny_env", cpp_sources=TINY, no_implicit_headers=True)

class ModelNew(nn.Module):
    pass
'''


def test_compiler_chosen_through_the_environment_at_import_is_ignored(tmp_path):
    marker = tmp_path / "marker"
    sol = _write(tmp_path, "cxx_env.py", CXX_FROM_ENV.format(marker=marker))
    result = build_solution(sol, tmp_path / "staging", "cpu", 300, BuildOptions(arch=""))
    assert result.ok, result.log  # built with the compiler pinned before the import
    assert any(a.endswith("kp_tiny_env.so") for a in result.artifacts)
    assert not marker.exists()


@pytest.mark.parametrize(
    "rel, declared",
    [
        ("torch_extensions/kp-add-0123456789abcdef/add.so", True),
        ("torch_extensions/kp-add-0123456789abcdef/kp_inline.json", True),
        ("torch_extensions/py311_cu130/kp-add-0123456789abcdef/add.so", True),
        ("native/" + "0f" * 16 + ".cubin", True),
        ("torch_extensions/kp-add-0123456789abcdef/other.so", False),
        ("torch_extensions/kp-add-0123456789abcdef/main.o", False),
        ("torch_extensions/kp-add-0123456789abcdef/build.ninja", False),
        ("torch_extensions/sitecustomize.py", False),
        ("native/evil.so", False),
        ("triton/abc/kernel.cubin", False),
        ("sitecustomize.py", False),
    ],
)
def test_only_built_extensions_stamps_and_cubins_are_declared_outputs(rel, declared):
    from kernelproof.build.builder import declared_output

    assert declared_output(rel) is declared


WHO_AM_I = (
    "import json, os, sys\n"
    "open(os.path.join(os.environ['HOME'], 'who.json'), 'w').write(json.dumps([os.getppid(), sys.orig_argv]))\n"
    "import torch.nn as nn\n"
    "class ModelNew(nn.Module):\n    pass\n"
)


def test_a_build_is_forked_from_a_zygote_and_contained_as_a_started_one(tmp_path, monkeypatch):
    """Forked (the default) or started as an interpreter (KERNELPROOF_ZYGOTE=0): the same layers."""
    from kernelproof.host import zygote

    sol = _write(tmp_path, "who.py", WHO_AM_I)
    forked = build_solution(sol, tmp_path / "forked", "cpu", 120, CPU_UNGUARDED)
    assert forked.ok, forked.log
    parent, argv = json.loads((tmp_path / "forked" / "home" / "who.json").read_text())
    zygotes = {int(v.split()[1]) for v in zygote.status().values() if v.startswith("pid ")}
    assert parent in zygotes and "kernelproof.worker.zygote" in argv, (parent, zygotes, argv)

    monkeypatch.setenv("KERNELPROOF_ZYGOTE", "0")
    started = build_solution(sol, tmp_path / "started", "cpu", 120, CPU_UNGUARDED)
    assert started.ok, started.log
    _, argv = json.loads((tmp_path / "started" / "home" / "who.json").read_text())
    assert "kernelproof.build.builder_main" in argv, argv
    assert forked.layers and [(x.name, x.active) for x in forked.layers] == [
        (x.name, x.active) for x in started.layers
    ]


def test_only_this_interpreter_running_the_builder_module_is_forked():
    import sys

    from kernelproof.host.spawn import _entry_args

    ours = [sys.executable, "-P", "-m", "kernelproof.build.builder_main", "a.py", "staging"]
    assert _entry_args(ours, "builder") == ["a.py", "staging"]
    assert _entry_args(ours, None) is None  # not a zygote's entry
    assert _entry_args(["/opt/other/python3", *ours[1:]], "builder") is None  # BuildOptions.python
    assert _entry_args([sys.executable, "-X", "dev", *ours[1:]], "builder") is None  # flags it lacks
    assert _entry_args([sys.executable, "-P", "-m", "kernelproof.worker", "x"], "builder") is None


def test_kill_group_returns_once_no_member_of_the_group_still_runs():
    import subprocess

    from kernelproof.host.spawn import kill_group

    leader = subprocess.Popen(
        ["sh", "-c", "sleep 300 & sleep 300 & wait"], start_new_session=True, stdin=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 10
        while len(members.descendants(leader.pid)) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        children = members.descendants(leader.pid)
        assert len(children) == 2
        kill_group(leader.pid)
        assert all(members.state(pid) in ("", "Z", "X") for pid in children | {leader.pid})
    finally:
        leader.kill()
        leader.wait()
