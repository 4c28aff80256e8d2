"""The ``kernelproof`` command: a thin layer over :mod:`kernelproof.api` (docs/architecture.md, house rule 10).

Each verb parses its options, calls one function of the API, prints what it returns, and exits
with a code from the one table (kernelproof/exits.py; ``--help`` prints it):

    0  pass: the candidate was accepted, the claim holds, the verb did what it was asked
    1  rejected: the candidate failed, a task failed its audit, or a claim does not hold
    2  a bad task or usage: a missing file, a bad option, a task that does not load
    3  kernelproof's own failure (an internal_error verdict too): please report it
    4  optimize only: the LLM provider failed (its calls kept failing after their retries)
  130  interrupted (Ctrl-C)

A verb over many items (``bench``, ``certify``, ``audit`` of a folder) exits with the worst code
among them. Errors go to stderr, as ``error: <message>``; results go to stdout, or to stderr when
``--json -`` gives stdout to the JSON. A reader that closes the pipe early (``| head``) changes no
exit code. The long verbs show their progress, and Ctrl-C ends any verb within 5 s with one line
of what was kept (kernelproof/cli_progress.py).
"""

from __future__ import annotations

import os
import sys
from typing import Annotated

import typer

from kernelproof import cli_progress, exits
from kernelproof.commands.audit import audit_command
from kernelproof.commands.bench import bench_command
from kernelproof.commands.ceilings import ceilings_command
from kernelproof.commands.evaluation import compare_command, eval_command
from kernelproof.commands.failures import parser_error, unexpected
from kernelproof.commands.help import summarise
from kernelproof.commands.results import results_command
from kernelproof.commands.streams import ClosedPipeSafe
from kernelproof.console import make_console, print_error
from kernelproof.errors import KernelproofError

EXIT_HELP = exits.help_text()

app = typer.Typer(
    name="kernelproof",
    help="Prove whether a GPU kernel is correct and how much faster it really is.",
    epilog=EXIT_HELP,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # click's own help: it wraps at the terminal's width (80 in a pipe) without cutting a default
    # or a word with "...", and shows a bool flag as a bare flag; Rich's panels did neither.
    rich_markup_mode=None,
)


def _version(shown: bool) -> None:
    """``kernelproof --version``: the version a bug report names, without importing torch."""
    if shown:
        from kernelproof._version import __version__

        typer.echo(f"kernelproof {__version__}")
        raise typer.Exit(exits.EXIT_PASS)


@app.callback()
def _main(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Show the version and exit."),
    ] = False,
) -> None:
    """Prove whether a GPU kernel is correct and how much faster it really is."""


# The verbs, each in its module under kernelproof/commands/, in the order --help lists them.
app.command("eval", epilog=EXIT_HELP)(eval_command)
app.command("bench", epilog=EXIT_HELP)(bench_command)
app.command("audit", epilog=EXIT_HELP)(audit_command)
app.command("results", epilog=EXIT_HELP)(results_command)
app.command("compare", epilog=EXIT_HELP)(compare_command)
app.command("ceilings", epilog=EXIT_HELP)(ceilings_command)


def _register_optional() -> None:
    """Verbs whose modules bring optional dependencies register without importing them eagerly
    (once: ``run`` may be called more than once in a process)."""
    if any(c.name == "report" for c in app.registered_commands):
        return
    try:
        from kernelproof.commands.report import certify_command, keys_command, report_command, verify_command

        app.command("report", epilog=EXIT_HELP)(report_command)
        app.command("certify", epilog=EXIT_HELP)(certify_command)
        app.command("verify", epilog=EXIT_HELP)(verify_command)
        app.command("keys", epilog=EXIT_HELP)(keys_command)
    except ImportError:  # pragma: no cover - the report package is part of the core install
        pass
    try:
        from kernelproof.commands.optimize import optimize_command

        app.command("optimize", epilog=EXIT_HELP)(optimize_command)
    except ImportError:
        pass
    try:
        from kernelproof.commands.kernelbench import kernelbench_command

        app.command("kernelbench", epilog=EXIT_HELP)(kernelbench_command)
    except ImportError:  # pragma: no cover - part of the core install
        pass
    try:
        from kernelproof.commands.serve import serve_command

        app.command("serve", epilog=EXIT_HELP)(serve_command)
    except ImportError:
        pass
    try:
        from kernelproof.commands.cache import cache_app

        app.add_typer(cache_app, name="cache", epilog=EXIT_HELP)
    except ImportError:
        pass


def main() -> None:
    if os.geteuid() != 0:  # workers share our uid: close our /proc entries to them (never done by api)
        from kernelproof.sandbox.identity import make_parent_nondumpable

        make_parent_nondumpable()
    sys.stdout = ClosedPipeSafe(sys.stdout)  # type: ignore[assignment]
    with cli_progress.interruptible():  # Ctrl-C: one line of what was kept, exit 130 within 5 s
        code = run()
    sys.stdout.flush()
    sys.exit(code)


def run(args: list[str] | None = None) -> int:
    """Run the command line on ``args`` (default: sys.argv) and return its exit code; every error
    is printed to stderr in one wording, ``error: <message>``, and mapped by kernelproof/exits.py."""
    stderr = make_console(stderr=True)  # made by each run: its width is this run's
    _register_optional()
    summarise(app)
    try:
        rv = app(args=args, standalone_mode=False)
        return rv if isinstance(rv, int) else exits.EXIT_PASS
    except typer.Exit as e:
        return e.exit_code
    except KernelproofError as exc:
        print_error(stderr, str(exc))
        return exits.of_error(exc)
    except Exception as exc:
        code = parser_error(exc)
        return unexpected(exc) if code is None else code


if __name__ == "__main__":
    main()
