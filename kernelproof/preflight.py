"""What every verb checks before it runs: its options and its files.

Split from :mod:`kernelproof.api` so that every verb, and the verbs beside it
(:mod:`kernelproof.survey`), check the same way in one place: a caller's mistake is a
:class:`~kernelproof.errors.UsageError` that names the bad option or path, raised before anything
is evaluated, never a verdict (a verdict is about the solution).
"""

from __future__ import annotations

from pathlib import Path

from kernelproof.errors import UsageError
from kernelproof.options import TIME_LIMITS, EvalOptions, normalize_baselines
from kernelproof.task import POLICIES

PathLike = str | Path
SHAPE_VARIANTS = ("probe", "auto", "task")  # EvalOptions.shape_variants (options.py says what each does)


def checked_options(options: EvalOptions | None) -> EvalOptions:
    """``options`` as every verb runs them, or a UsageError naming the bad one: the one place
    baselines are normalised and the device, policy and other choices are checked. Every verb of
    :mod:`kernelproof.api` and :mod:`kernelproof.survey` calls it first; a caller that records its options before evaluating (a certificate, an
    agent's run) calls it to record what will run."""
    from kernelproof.executors.local import resolve_devices  # imports torch: here, not at import

    options = options or EvalOptions()
    try:
        baselines = normalize_baselines(options.baselines)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    resolve_devices(options.device)  # UsageError for a device that is malformed or not there
    if options.per_device < 1:
        raise UsageError(f"--per-device must be at least 1, not {options.per_device}")
    if options.build_workers < 0:
        raise UsageError(f"--build-workers must be 0 (automatic) or more, not {options.build_workers}")
    if options.shape_variants not in SHAPE_VARIANTS:
        raise UsageError(
            f"--shape-variants must be {' | '.join(SHAPE_VARIANTS)}, not {options.shape_variants!r}"
        )
    if options.policy is not None and options.policy not in POLICIES:
        raise UsageError(f"--policy must be {' | '.join(POLICIES)}, not {options.policy!r}")
    if options.seeds_per_case < 1:
        raise UsageError(f"--seeds-per-case must be at least 1, not {options.seeds_per_case}")
    for name in (*TIME_LIMITS, "time_budget_s"):  # a budget of 0 or less timed one round regardless
        value = getattr(options, name)
        if not value > 0:
            flag = "--" + name.removesuffix("_s").replace("_", "-")
            raise UsageError(f"{flag} must be more than 0 s, not {value}")
    return options.replace(baselines=baselines)


def require_files(*paths: PathLike, what: tuple[str, ...] = ("task", "solution")) -> None:
    """UsageError unless each path is a file, saying what it is instead (missing, or a folder).

    Cheap to import (no torch): the CLI calls it before it imports the API, so a mistyped path is
    refused at once rather than after the seconds torch takes to import."""
    for path, name in zip(paths, what):
        p = Path(path)
        if p.is_dir():
            hint = " (bench evaluates a folder of tasks: kernelproof bench SUITE --solutions DIR)"
            raise UsageError(f"the {name} {p} is a directory, not a file" + (hint if name == "task" else ""))
        if not p.is_file():
            raise UsageError(f"{name} file not found: {p}")


def require_extra(extra: str, *modules: str) -> None:
    """UsageError naming the extra to install when one of `modules` is not importable.

    A command whose dependencies are an optional extra (``serve``, ``agent``, ``ray``) says so at
    once, rather than failing as an internal error at its first import of the missing package."""
    import importlib.util

    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        raise UsageError(
            f"{', '.join(missing)} {'is' if len(missing) == 1 else 'are'} not installed: "
            f"pip install 'kernelproof[{extra}]'"
        )


def require_writable(path: str | None, option: str = "--json") -> None:
    """UsageError unless ``path`` (an output file; ``-`` is stdout) can be created: its folder
    exists and it is not a folder itself. Checked before anything runs, so an evaluation of minutes
    is not lost to a mistyped output path at its end."""
    if not path or path == "-":
        return
    p = Path(path)
    if p.is_dir():
        raise UsageError(f"{option} {path} is a folder; give a file name")
    folder = p.parent
    if not folder.is_dir():
        raise UsageError(f"{option} {path}: the folder {folder} does not exist")
