"""Parsing and compiling in the parent, one thread at a time (kernelproof/pyast.py): CPython's AST
converter keeps its recursion depth per interpreter, and two conversions interleaved across
threads fail with a spurious SystemError (seen once in this suite while four threads loaded a task)."""

from __future__ import annotations

import ast
import threading

import pytest

from kernelproof import pyast

SPURIOUS = SystemError("AST constructor recursion depth mismatch (before=27, after=22)")


def test_parse_and_compile_are_the_standard_ones():
    tree = pyast.parse("x = 1 + 2", filename="t.py")
    assert ast.dump(tree) == ast.dump(ast.parse("x = 1 + 2"))
    ns: dict = {}
    exec(pyast.compile_code(tree, "t.py"), ns)
    assert ns["x"] == 3
    assert isinstance(pyast.parse("1 + 2", mode="eval"), ast.Expression)
    with pytest.raises(SyntaxError):
        pyast.parse("def (:")


def test_the_spurious_depth_mismatch_is_retried_once_and_other_system_errors_are_not(monkeypatch):
    real, calls = ast.parse, []

    def flaky(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            raise SPURIOUS
        return real(*args, **kwargs)

    monkeypatch.setattr(ast, "parse", flaky)
    assert isinstance(pyast.parse("x = 1"), ast.Module) and len(calls) == 2

    def broken(*args, **kwargs):
        raise SystemError("something else")

    monkeypatch.setattr(ast, "parse", broken)
    with pytest.raises(SystemError, match="something else"):
        pyast.parse("x = 1")


def test_a_second_thread_parses_only_after_the_first_is_done(monkeypatch):
    real, inside, order = ast.parse, threading.Event(), []

    def slow_first(*args, **kwargs):
        if not inside.is_set():
            inside.set()
            order.append("first in")
            threading.Event().wait(0.3)  # the second thread is waiting for the lock meanwhile
            order.append("first out")
        else:
            order.append("second in")
        return real(*args, **kwargs)

    monkeypatch.setattr(ast, "parse", slow_first)
    first = threading.Thread(target=pyast.parse, args=("a = 1",))
    first.start()
    inside.wait(5)
    second = threading.Thread(target=pyast.parse, args=("b = 2",))
    second.start()
    first.join(5)
    second.join(5)
    assert order == ["first in", "first out", "second in"]
