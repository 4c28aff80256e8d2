"""CI runs exactly the README's test command, and that command can neither hang nor run on one core."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _readme_test_command() -> str:
    section = ROOT.joinpath("README.md").read_text().split("\n## Test\n", 1)[1]
    return re.search(r"```bash\n(.+?)\n```", section, re.S).group(1).strip()


def test_ci_runs_exactly_the_readmes_test_command():
    command = _readme_test_command()
    script = [ln.strip() for ln in ROOT.joinpath(".ci/run").read_text().splitlines()]
    runs = [ln for ln in script if ln and not ln.startswith("#") and "pytest" in ln and "pip" not in ln]
    assert runs == [command], runs


def test_the_test_command_runs_on_two_workers_each_test_under_a_timeout():
    argv = shlex.split(_readme_test_command())
    assert argv[argv.index("-n") + 1] == "2"
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    ini = tomllib.loads(ROOT.joinpath("pyproject.toml").read_text())
    addopts = shlex.split(ini["tool"]["pytest"]["ini_options"]["addopts"])
    timeout = next(float(a.split("=", 1)[1]) for a in addopts if a.startswith("--timeout="))
    assert 0 < timeout <= 900  # a hung test is ended well within CI's 90 minutes
    assert addopts[addopts.index("--dist") + 1] == "loadgroup"  # zoo.SHARED_PATHS run on one worker
    dev = ini["project"]["optional-dependencies"]["dev"]
    assert any(d.startswith("pytest-xdist") for d in dev) and any(d.startswith("pytest-timeout") for d in dev)


class _Reporter:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def write(self, text: str) -> None:
        pass

    def write_line(self, line: str) -> None:
        self.lines.append(line)


def test_a_status_line_counts_the_tests_and_names_the_one_running_longest(monkeypatch):
    from types import SimpleNamespace

    import progress

    monkeypatch.setattr(progress, "PROGRESS_EVERY_S", 0.0)
    state = progress._Progress(reporter := _Reporter())
    state.start("tests/a.py::slow")
    state.start("tests/b.py::quick")
    state.report(SimpleNamespace(nodeid="tests/b.py::quick", when="call", failed=True))
    assert reporter.lines == []  # a line at the end of a test only
    state.report(SimpleNamespace(nodeid="tests/b.py::quick", when="teardown", failed=False))
    assert "1 tests done, 1 failed; running longest: tests/a.py::slow" in reporter.lines[-1]


def test_a_real_run_prints_status_lines():
    """The hooks are live in the suite's own conftest (run after the terminal reporter exists)."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "KERNELPROOF_TEST_PROGRESS_S": "0", "PYTHONPATH": str(ROOT)}
    ran = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "tests/repo/test_docs.py::test_every_repository_path_written_in_backticks_exists",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert re.search(r"\] 1 tests done, 0 failed", ran.stdout), ran.stdout
