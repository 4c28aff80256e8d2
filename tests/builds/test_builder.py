"""build_solution: the child process, its scrubbed environment, its timeout, its trimmed log."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernelproof.build.builder import BuildOptions, build_solution, trim_log
from kernelproof.build.env import nvcc_path

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


def test_build_that_never_ends_is_killed_by_the_timeout(tmp_path):
    marker = tmp_path / "staging" / "home" / "grandchild.pid"  # $HOME: the builder writes only in staging
    sol = _write(
        tmp_path,
        "hang.py",
        "import os, subprocess\n"
        "p = subprocess.Popen(['sleep', '300'])\n"
        "open(os.path.join(os.environ['HOME'], 'grandchild.pid'), 'w').write(str(p.pid))\n"
        "while True:\n    pass\n",
    )
    result = build_solution(sol, tmp_path / "staging", "cpu", 20, CPU_UNGUARDED)  # torch imports first
    assert result.timed_out and not result.ok
    assert "did not finish in 20 s" in result.log
    pid = int(marker.read_text())
    assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split()[2]


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


def test_write_outside_staging_during_the_build_is_a_violation(tmp_path):
    target = tmp_path / "shared-cache" / "entries" / "planted.so"
    sol = _write(
        tmp_path,
        "plant.py",
        f"import os\nos.makedirs({str(target.parent)!r}, exist_ok=True)\nopen({str(target)!r}, 'wb').write(b'x')\n",
    )
    result = build_solution(sol, tmp_path / "staging", "cpu", 120, CPU)
    assert not result.ok
    assert "outside the worker's private directory" in result.violation
    assert not target.exists()
