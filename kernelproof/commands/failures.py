"""What the command line does with an exception that reached its top: a parser's error (exit 2,
or 130 for Ctrl-C at a prompt) printed in the one wording, anything else kernelproof's own failure
(exit 3) with its traceback."""

from __future__ import annotations

import sys

from kernelproof import exits
from kernelproof.console import make_console, print_error


def unexpected(exc: Exception) -> int:
    """Anything else that reached the top is kernelproof's own failure: its traceback, then the error."""
    import traceback

    from kernelproof.text import terminal

    trace = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    sys.stderr.write(terminal(trace, multiline=True) + "\n")
    print_error(
        make_console(stderr=True),
        "kernelproof failed (internal error): please report it with the traceback above",
    )
    return exits.EXIT_INTERNAL


def parser_error(exc: Exception) -> int | None:
    """The exit code of an error of the command-line parser (printed here), or None for any other.

    Typer raises click's exceptions (its own copy of them in recent versions), recognised by shape.
    """
    name = type(exc).__name__
    if name == "Abort":  # Ctrl-C while a prompt or the parser was waiting
        print_error(make_console(stderr=True), "interrupted")
        return exits.EXIT_INTERRUPTED
    if name == "NoArgsIsHelpError":  # a verb given no arguments: its help, as usage
        exc.show()  # type: ignore[attr-defined]
        return exits.EXIT_USAGE
    if hasattr(exc, "format_message") and hasattr(exc, "exit_code"):  # an unknown option, a bad value
        ctx = getattr(exc, "ctx", None)
        verb = ctx.command_path if ctx is not None else "kernelproof"
        print_error(make_console(stderr=True), f"{exc.format_message()} (see {verb} --help)")
        return exits.EXIT_USAGE
    return None
