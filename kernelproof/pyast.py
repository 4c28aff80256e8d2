"""Python source parsed and compiled under one lock.

CPython (3.11 and 3.12 at least) keeps the AST converter's recursion depth in per-interpreter
state, not per thread. With several evaluations in flight, the parent's threads load tasks and
read solutions at the same time, and when one thread's conversion is interleaved with another's
(a finaliser run by the garbage collector mid-conversion can hand over the GIL) the second fails
with a spurious ``SystemError: AST constructor recursion depth mismatch`` (python/cpython#106905):
seen once in this suite, in a test that loads a task in four threads. Every ``ast.parse`` and
every compile of source or of a tree in the parent goes through here; the spurious error, should
it come from a parse outside kernelproof, is retried once.
"""

from __future__ import annotations

import ast
import threading
from types import CodeType
from typing import Any

_LOCK = threading.RLock()
_SPURIOUS = "recursion depth mismatch"


def parse(source: str, filename: str = "<unknown>", mode: str = "exec") -> Any:
    """``ast.parse``, one thread at a time."""
    return _once_more(lambda: ast.parse(source, filename=filename, mode=mode))


def compile_code(source: str | ast.AST, filename: str, mode: str = "exec") -> CodeType:
    """``compile`` of source text or of a tree, one thread at a time."""
    return _once_more(lambda: compile(source, filename, mode))


def _once_more(fn):
    with _LOCK:
        try:
            return fn()
        except SystemError as exc:
            if _SPURIOUS not in str(exc):
                raise
            return fn()
