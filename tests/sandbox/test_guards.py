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
