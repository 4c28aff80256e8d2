"""The tests are laid out like the package: each test file sits in the folder of what it tests
(tests/verify/ for kernelproof/verify/, ...), and the command line is run by one runner, the one in
tests/support/cli_support.py.

At the top of tests/ only what tests the tree as a whole: this layout, the house's rules over every
module (the layer contract, test_layers.py; one file name per module, test_module_names.py; the
length of a function, test_function_length.py) and the root package, kernelproof/__init__.py
(test_root_package.py).
A new test file goes in the folder of the package it mainly tests."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

TESTS = Path(__file__).resolve().parent
PACKAGE = TESTS.parent / "kernelproof"

TOP_LEVEL = {
    "test_layout.py",
    "test_layers.py",
    "test_module_names.py",
    "test_function_length.py",
    "test_root_package.py",
}

# Folders of tests/ that are not named after a subpackage of kernelproof, and what they test.
OTHER_FOLDERS = {
    "builds": "kernelproof/build/",
    "certify": "certificates: kernelproof/certify.py, certificate.py, band.py, signing.py",
    "store": "the results store: kernelproof/store.py, store_key.py, submission.py's single read",
    "task": "tasks and their inputs: kernelproof/task.py, inputs.py",
    "core": "the bottom layers' modules with no folder of their own (errors, jsonsafe, text, ...)",
    "benchmarks": "the scripts of benchmarks/",
    "repo": "the README, docs/ and CI against the tool",
    "exploits": "the exploit zoo, run through the whole evaluator",
    "legit": "legitimate solutions that must pass, run through the whole evaluator",
    "protocol": "forged evidence and hostile frames against the parent",
}
HELPERS = {"support", "data"}  # shared helpers and the tasks and solutions the tests judge

# A runner of the command line: typer's test runner, `python -m kernelproof.cli` in a child, a
# pseudo-terminal, the entry points called directly.
RUNNER = re.compile(
    "|".join(
        (
            r"\bCliRunner\b",
            r"typer\.testing",
            r"[\"']-m[\"'],\s*[\"']kernelproof\.cli[\"']",
            r"\bpty\.fork\(",
            r"from kernelproof\.cli import [^\n]*\b(?:run|main)\b",
            r"\bcli\.(?:run|main)\(",
        )
    )
)
RUNNER_ALLOWED = {
    # The server: a process started and stopped around the tests, not a command run to its end.
    "serve/serving.py",
    # A probe that reads the child's sys.modules after the CLI returns (torch never imported).
    "commands/test_cli_verbs.py",
}


def test_no_test_file_sits_at_the_top_of_tests_outside_the_short_list():
    top = {p.name for p in TESTS.glob("test_*.py")}
    assert top <= TOP_LEVEL, f"move into the folder of the package each tests: {sorted(top - TOP_LEVEL)}"


def test_every_folder_of_tests_is_a_package_s_or_says_what_it_tests():
    subpackages = {p.parent.name for p in PACKAGE.glob("*/__init__.py")}
    folders = {p.relative_to(TESTS).parts[0] for p in TESTS.glob("*/**/test_*.py")}
    unknown = folders - subpackages - set(OTHER_FOLDERS)
    assert not unknown, f"a folder named after no subpackage of kernelproof: {sorted(unknown)}"
    assert not (HELPERS & folders), "tests/support and tests/data hold helpers and data, not tests"


def test_test_modules_have_unique_names_outside_packages():
    """pytest imports a test file outside a package (no __init__.py) by its file name alone."""
    names = Counter(
        p.name
        for p in TESTS.rglob("test_*.py")
        if not (p.parent / "__init__.py").is_file() and p.parent != TESTS
    )
    assert not [n for n, k in names.items() if k > 1], [n for n, k in names.items() if k > 1]


def runner_copies(text: str) -> list[str]:
    return [m.group(0) for m in RUNNER.finditer(text)]


def test_the_runner_patterns_find_each_kind_of_copy():
    assert runner_copies("from typer.testing import CliRunner\nCliRunner().invoke(app, [])")
    assert runner_copies('subprocess.run([sys.executable,\n    "-m",\n    "kernelproof.cli", "eval"])')
    assert runner_copies("pid, fd = pty.fork()")
    assert runner_copies("from kernelproof.cli import run\nrun(['eval'])")
    assert not runner_copies("from cli_support import run_child, run_on_terminal, run_piped")


def test_the_command_line_is_run_only_by_the_runner_in_tests_support():
    copies = [
        f"{path.relative_to(TESTS)}: {found!r}"
        for path in sorted(TESTS.rglob("*.py"))
        if path.parts[len(TESTS.parts)] != "support" and path != Path(__file__).resolve()
        if str(path.relative_to(TESTS)) not in RUNNER_ALLOWED
        for found in runner_copies(path.read_text(errors="replace"))
    ]
    assert not copies, (
        "use tests/support/cli_support.py (run_here, run_piped, run_child, run_on_terminal): "
        + ("; ".join(copies))
    )
    assert all((TESTS / p).is_file() and runner_copies((TESTS / p).read_text()) for p in RUNNER_ALLOWED)
