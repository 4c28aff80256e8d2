"""A Python snippet run in a process of its own that has torch and the worker's modules imported.

Several tests need what a worker's interpreter looks like right after its imports (which dispatch
keys, library registrations or modes are left, which names the harness reads), untouched by this
test process, which has loaded the parent's modules and run other tests. A fresh interpreter per
snippet cost about 1.5 s of CPU each on a 2-core machine, nearly all of it torch's import. Here a
multiprocessing forkserver imports :data:`PRELOAD` once per test process and each snippet runs in a
child forked from it: the state of an interpreter that has just imported them, and nothing else.

Not for what depends on how the process started (its memory peak, start-up environment variables,
whether something was imported at all): those start an interpreter of their own.
"""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

PRELOAD = ["torch", "kernelproof.worker.message_loop"]
_context = None


def run(code: str, *argv: str, path: Sequence[str] = (), timeout: float = 300) -> subprocess.CompletedProcess:
    """Run `code` as ``python -c CODE ARGV`` would, with `path` first on ``sys.path``; its output."""
    global _context
    if _context is None:
        _context = multiprocessing.get_context("forkserver")
        _context.set_forkserver_preload(PRELOAD)
    with tempfile.TemporaryDirectory(prefix="kp-snippet-") as folder:
        out, err = Path(folder) / "stdout", Path(folder) / "stderr"
        child = _context.Process(
            target=_snippet, args=(code, list(argv), [str(p) for p in path], str(out), str(err))
        )
        child.start()
        child.join(timeout)
        if child.is_alive():
            child.kill()
            child.join()
            raise subprocess.TimeoutExpired(["<forked snippet>", *argv], timeout)
        return subprocess.CompletedProcess(
            ["<forked snippet>", *argv],
            child.exitcode,
            out.read_text() if out.exists() else "",
            err.read_text() if err.exists() else "",
        )


def _snippet(code: str, argv: list[str], path: list[str], out: str, err: str) -> None:
    """In the forked child: output to the two files, then the snippet as ``__main__``."""
    for fd, name in ((1, out), (2, err)):
        target = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(target, fd)
        os.close(target)
    sys.argv = ["-c", *argv]
    sys.path[:0] = path
    try:
        exec(compile(code, "<string>", "exec"), {"__name__": "__main__", "__builtins__": __builtins__})
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
