"""A module's file name says what it holds, once in the package (docs/architecture.md, house rule 2).

Two packages each with their own ``records.py`` or ``options.py`` make a name that says nothing
without its folder: a traceback, a grep hit or a docstring's "see timing.py" could be either. So a
file name is used once under kernelproof/. The exceptions: ``__init__.py`` and ``__main__.py``,
whose names Python fixes, and ``commands/<verb>.py``, the module of the command-line verb of that
name, which may share its name with the module the verb is a thin layer over (``commands/audit.py``
and ``verify/audit.py``). The verbs are read from the typer app, so a command module is exempt only
while its verb is registered.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import kernelproof

PACKAGE = Path(kernelproof.__file__).resolve().parent
PYTHON_FIXED = {"__init__.py", "__main__.py"}


def cli_verbs() -> set[str]:
    """The top-level verbs of the command line as click sees them (a group such as ``cache`` too)."""
    import typer

    from kernelproof import cli

    cli._register_optional()
    return set(typer.main.get_command(cli.app).commands)


def reused_names(root: Path, verbs: set[str]) -> dict[str, list[str]]:
    """Each file name used by more than one module under `root`, with the modules (paths under it)."""
    by_name: dict[str, list[str]] = defaultdict(list)
    for path in sorted(root.rglob("*.py")):
        relative = path.relative_to(root)
        if path.name in PYTHON_FIXED:
            continue
        if relative.parent == Path("commands") and path.stem in verbs:
            continue
        by_name[path.name].append(relative.as_posix())
    return {name: where for name, where in sorted(by_name.items()) if len(where) > 1}


def test_every_module_file_name_is_used_once_in_the_package():
    reused = reused_names(PACKAGE, cli_verbs())
    assert not reused, (
        "module file names used in more than one package (name each for what it holds): "
        + "; ".join(f"{name}: {', '.join(where)}" for name, where in reused.items())
    )


def test_a_reused_name_is_named_with_its_modules_and_only_a_verbs_module_is_exempt(tmp_path):
    for relative in ("evaluate/records.py", "agent/records.py", "commands/audit.py", "verify/audit.py"):
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / relative).touch()
    for package in ("evaluate", "agent", "commands", "verify"):
        (tmp_path / package / "__init__.py").touch()
    records = {"records.py": ["agent/records.py", "evaluate/records.py"]}
    assert reused_names(tmp_path, {"audit"}) == records
    assert reused_names(tmp_path, set()) == {"audit.py": ["commands/audit.py", "verify/audit.py"], **records}
