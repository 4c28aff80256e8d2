"""The audit hook judges some events whoever raises them: a library trampoline gains nothing."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from kernelproof.sandbox.guards import EXIT_VIOLATION, VIOLATION_PREFIX


def _armed(tmp_path, body: str) -> subprocess.CompletedProcess:
    sol = tmp_path / "sol.py"
    sol.write_text("x = 1\n")
    (tmp_path / "tmp").mkdir()
    code = textwrap.dedent(
        f"""
        from kernelproof.sandbox.guards import GuardConfig, install
        switch = install(GuardConfig({str(sol)!r}, {str(tmp_path)!r}))
        switch(True)
        """
    ) + textwrap.dedent(body)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize(
    "call",
    [  # each imports what it uses: exec runs it in the library's own globals
        "import gc; gc.get_objects()",
        "import os; os.kill(os.getpid(), 0)",
        "import socket; socket.socket()",
        "import sys; sys.settrace(lambda *a: None)",
    ],
)
def test_forbidden_event_through_a_library_trampoline_ends_the_process(tmp_path, call):
    done = _armed(
        tmp_path,
        f"""
        import gc, os, socket, sys
        from torch.utils._pytree import tree_map
        tree_map(exec, [{call!r}])
        print("still running")
        """,
    )
    assert done.returncode == EXIT_VIOLATION, done.stdout + done.stderr
    assert VIOLATION_PREFIX in done.stderr and "whoever calls it" in done.stderr


def test_a_hook_set_without_an_event_is_named_by_the_integrity_check(tmp_path):
    done = _armed(
        tmp_path,
        """
        import threading
        from kernelproof.sandbox.guards import integrity_check
        check = integrity_check([])
        threading.settrace(lambda *a: None)
        print(check())
        """,
    )
    assert done.returncode == 0, done.stderr
    assert "threading.settrace" in done.stdout


def _import_armed(tmp_path, solution: str) -> subprocess.CompletedProcess:
    """Import `solution` as the candidate's file, the guards armed first."""
    sol = tmp_path / "sol.py"
    sol.write_text(textwrap.dedent(solution))
    code = textwrap.dedent(
        f"""
        import importlib.util
        import sys
        from kernelproof.sandbox.guards import GuardConfig, install
        switch = install(GuardConfig({str(sol)!r}, {str(tmp_path)!r}))
        switch(True)
        spec = importlib.util.spec_from_file_location("kernelproof_solution", {str(sol)!r})
        module = sys.modules["kernelproof_solution"] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        print("imported")
        """
    )
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)


DECLARES_CLASSES = """
from __future__ import annotations

import collections
import dataclasses
import enum
import typing


@dataclasses.dataclass(frozen=True)
class LaunchConfig:
    block: int = 1024
    num_warps: int = 4


class Shape(typing.NamedTuple):  # its annotations are strings here: typing compiles them
    rows: int
    cols: int


Pair = collections.namedtuple("Pair", "a b")
assert LaunchConfig().block == 1024 and Shape(2, 3).cols == 3 and Pair(1, 2).b == 2

# typing and enum read their caller's module name through sys._getframe
T = typing.TypeVar("T")
P = typing.ParamSpec("P")
BlockSize = typing.NewType("BlockSize", int)
Layout = enum.Enum("Layout", "ROW_MAJOR COL_MAJOR")
"""


def test_a_dataclass_or_namedtuple_the_solution_declares_is_not_its_exec(tmp_path):
    """The standard library writes and execs their methods; the solution only declared a class."""
    done = _import_armed(tmp_path, DECLARES_CLASSES)
    assert done.returncode == 0 and "imported" in done.stdout, done.stderr


def test_the_solutions_own_exec_beside_them_is_still_refused(tmp_path):
    done = _import_armed(tmp_path, DECLARES_CLASSES + "\nexec('y = 2')\n")
    assert done.returncode == EXIT_VIOLATION, done.stdout + done.stderr
    assert VIOLATION_PREFIX in done.stderr and "forbidden to solution code" in done.stderr


def test_what_a_generated_method_does_is_still_the_solutions(tmp_path):
    """A dataclass default factory that starts a process: the generated __init__ runs it, and the act
    is judged as the solution's (the generated code's frames name no file)."""
    done = _import_armed(
        tmp_path,
        """
        import dataclasses
        import os


        @dataclasses.dataclass
        class Sneaky:
            pid: int = dataclasses.field(default_factory=lambda: os.system("true"))


        Sneaky()
        """,
    )
    assert done.returncode == EXIT_VIOLATION, done.stdout + done.stderr
    assert "os.system" in done.stderr


def test_logging_that_names_the_callers_line_is_not_frame_walking(tmp_path):
    """Published solutions log at INFO: logging reads the caller's frame for the record's line."""
    done = _import_armed(
        tmp_path,
        """
        import logging

        logging.basicConfig(level=logging.INFO)
        logging.getLogger(__name__).info("loading the kernel")
        logging.info("and again")
        """,
    )
    assert done.returncode == 0 and "imported" in done.stdout, done.stderr
    assert "loading the kernel" in done.stderr


def test_a_frame_taken_through_logging_is_still_frame_walking(tmp_path):
    done = _import_armed(tmp_path, "import logging\n\nframe = logging.currentframe()\n")
    assert done.returncode == EXIT_VIOLATION, done.stdout + done.stderr
    assert "sys._getframe: forbidden to solution code" in done.stderr
