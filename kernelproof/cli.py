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
of what was kept (kernelproof/progress.py).
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from kernelproof import exits, progress
from kernelproof.commands.failures import parser_error, unexpected
from kernelproof.commands.help import summarise
from kernelproof.commands.options import (  # noqa: F401 - typer reads the signatures' names here
    Baselines,
    BuildCacheOpt,
    BuildWorkers,
    CaseTimeout,
    CorrectnessOnly,
    CpuThreads,
    Db,
    Device,
    EvalMode,
    EvaluationTimeout,
    Fresh,
    ImportTimeout,
    JsonOut,
    KernelbenchCompat,
    Policy,
    Precision,
    RefuseRandom,
    RequireSandbox,
    Seed,
    SeedsPerCase,
    ShapeVariants,
    TimeInterpreted,
    Timeout,
    TimeWhenBusy,
    TimingTimeout,
)
from kernelproof.commands.streams import ClosedPipeSafe
from kernelproof.console import REASON_CHARS, WHOLE_LINE_CHARS, make_console, print_error, say, say_wrapped
from kernelproof.errors import KernelproofError, UsageError
from kernelproof.options import EvalOptions
from kernelproof.preflight import require_files, require_writable

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


# Made again by each run(): a console takes its width (COLUMNS) and whether it is a terminal when it
# is made, and a run in a process that ran others (a notebook, a test) must see its own.
console = make_console()
stderr = make_console(stderr=True)


def _out(json_path: str | None):
    """Where the human-readable output goes: stdout, unless ``--json -`` gave it to the JSON."""
    return stderr if json_path == "-" else console


def _baselines(text: str) -> tuple[str, ...]:
    return tuple(text.split(","))  # checked and normalised by api.checked_options


@app.command("eval", epilog=EXIT_HELP)
def eval_command(
    task: Annotated[
        Path, typer.Argument(help="KernelBench-format task file (Model, get_inputs, get_init_inputs).")
    ],
    solution: Annotated[Path, typer.Argument(help="Solution file defining ModelNew.")],
    device: Device = "auto",
    json_path: JsonOut = None,
    baselines: Baselines = "eager",
    seed: Seed = None,
    correctness_only: CorrectnessOnly = False,
    cpu_threads: CpuThreads = 1,
    time_when_busy: TimeWhenBusy = False,
    time_interpreted: TimeInterpreted = False,
    kernelbench_compat: KernelbenchCompat = False,
    eval_mode: EvalMode = False,
    time_budget: Annotated[
        float, typer.Option("--time-budget", help="Seconds of timing per timed shape (cap).")
    ] = 20.0,
    samples: Annotated[bool, typer.Option("--samples", help="Keep raw timing samples in the JSON.")] = False,
    seeds_per_case: SeedsPerCase = 2,
    sanitize: Annotated[
        bool, typer.Option("--sanitize", help="Run the first case under compute-sanitizer (GPU; slow).")
    ] = False,
    shape_variants: ShapeVariants = "probe",
    policy: Policy = None,
    precision: Precision = None,
    refuse_random_reference: RefuseRandom = False,
    steady: Annotated[
        bool, typer.Option("--steady", help="Also measure the steady (back-to-back) regime, reported apart.")
    ] = False,
    fresh: Fresh = False,
    db: Db = None,
    timeout: Timeout = 600.0,
    import_timeout: ImportTimeout = 60.0,
    case_timeout: CaseTimeout = 300.0,
    timing_timeout: TimingTimeout = 600.0,
    evaluation_timeout: EvaluationTimeout = 3600.0,
    build_cache: BuildCacheOpt = None,
    build_workers: BuildWorkers = 0,
    require_sandbox: RequireSandbox = False,
) -> None:
    """Evaluate SOLUTION against TASK: one verdict, with reasons, cases, times and speedups."""
    require_files(task, solution)  # a mistyped path is refused before torch is imported (seconds)
    require_writable(json_path)
    from kernelproof.api import evaluate, reporting
    from kernelproof.console import print_verdict

    options = EvalOptions(
        device=device,
        baselines=_baselines(baselines),
        seed=seed,
        correctness_only=correctness_only,
        cpu_threads=cpu_threads,
        time_when_busy=time_when_busy,
        time_interpreted=time_interpreted,
        kernelbench_compat=kernelbench_compat,
        eval_mode=eval_mode,
        refuse_random_reference=refuse_random_reference,
        shape_variants=shape_variants,
        policy=policy,
        precision=precision,
        seeds_per_case=seeds_per_case,
        time_budget_s=time_budget,
        keep_samples=samples,
        steady=steady,
        sanitize=sanitize,
        fresh=fresh,
        db=db,
        timeout_s=timeout,
        import_timeout_s=import_timeout,
        case_timeout_s=case_timeout,
        timing_timeout_s=timing_timeout,
        evaluation_timeout_s=evaluation_timeout,
        build_cache=build_cache,
        build_workers=build_workers,
        require_sandbox=require_sandbox,
    )
    out = _out(json_path)
    busy = sys.stdout.isatty() and json_path != "-"
    # On a terminal a live line with the phase reached; piped, a line per phase on stderr (stdout
    # keeps the verdict alone).
    shown = progress.Progress("eval", console=console if busy else stderr)
    with (
        shown,
        reporting(progress.PhaseLine(shown) if shown.live else progress.phase_line),
        progress.keeping(
            lambda: "nothing was kept (the evaluation in flight was stopped; no verdict stored)"
        ),
    ):
        verdict = evaluate(task, solution, options)
    _write_json(json_path, verdict.to_json())
    print_verdict(verdict, out)
    raise typer.Exit(exits.of_verdict(verdict))


@app.command("bench", epilog=EXIT_HELP)
def bench_command(
    suite: Annotated[Path, typer.Argument(help="Folder of task files (searched recursively).")],
    solutions: Annotated[
        Path, typer.Option("--solutions", help="Folder with a solution of the same relative path per task.")
    ],
    device: Device = "auto",
    json_path: Annotated[
        str | None, typer.Option("--json", help="Write all verdicts here as a JSON list ('-' for stdout).")
    ] = None,
    baselines: Baselines = "eager",
    seed: Seed = None,
    correctness_only: CorrectnessOnly = False,
    cpu_threads: CpuThreads = 1,
    time_when_busy: TimeWhenBusy = False,
    time_interpreted: TimeInterpreted = False,
    kernelbench_compat: KernelbenchCompat = False,
    eval_mode: EvalMode = False,
    time_budget: Annotated[
        float, typer.Option("--time-budget", help="Seconds of timing per timed shape (cap).")
    ] = 10.0,
    shape_variants: ShapeVariants = "probe",
    policy: Policy = None,
    precision: Precision = None,
    refuse_random_reference: RefuseRandom = False,
    fresh: Fresh = False,
    db: Db = None,
    timeout: Timeout = 600.0,
    import_timeout: ImportTimeout = 60.0,
    case_timeout: CaseTimeout = 300.0,
    timing_timeout: TimingTimeout = 600.0,
    evaluation_timeout: EvaluationTimeout = 3600.0,
    seeds_per_case: SeedsPerCase = 2,
    only: Annotated[
        list[str] | None,
        typer.Option("--only", help="Keep tasks whose relative path contains this (repeatable)."),
    ] = None,
    executor: Annotated[str, typer.Option("--executor", help="local (one worker per GPU) | ray")] = "local",
    address: Annotated[
        str | None, typer.Option("--address", help="Ray cluster address (with --executor ray).")
    ] = None,
    build_cache: BuildCacheOpt = None,
    build_workers: BuildWorkers = 0,
    per_device: Annotated[
        int,
        typer.Option(
            "--per-device",
            help="Evaluations in flight per GPU: their untimed work overlaps, their timing never does.",
        ),
    ] = 1,
    require_sandbox: RequireSandbox = False,
    exit_zero: Annotated[
        bool,
        typer.Option(
            "--exit-zero",
            help="Exit 0 whatever the verdicts (for scripts that only want the table); misuse still exits 2.",
        ),
    ] = False,
) -> None:
    """Evaluate every task of SUITE with the solution at the same relative path under --solutions;
    print a table and fast_p. For a KernelBench run folder: kernelproof kernelbench."""
    require_writable(json_path)
    from kernelproof.api import bench, db_path, reporting, suite_pairs
    from kernelproof.console import AskedPaths, bench_table, display_path
    from kernelproof.progress import Progress
    from kernelproof.report.metrics import fast_p, fast_p_note, results_from

    found = suite_pairs(suite, solutions, only or ())
    options = EvalOptions(
        device=device,
        baselines=_baselines(baselines),
        seed=seed,
        correctness_only=correctness_only,
        cpu_threads=cpu_threads,
        time_when_busy=time_when_busy,
        time_interpreted=time_interpreted,
        kernelbench_compat=kernelbench_compat,
        eval_mode=eval_mode,
        refuse_random_reference=refuse_random_reference,
        shape_variants=shape_variants,
        policy=policy,
        precision=precision,
        seeds_per_case=seeds_per_case,
        time_budget_s=time_budget,
        fresh=fresh,
        db=db,
        timeout_s=timeout,
        import_timeout_s=import_timeout,
        case_timeout_s=case_timeout,
        timing_timeout_s=timing_timeout,
        evaluation_timeout_s=evaluation_timeout,
        build_cache=build_cache,
        build_workers=build_workers,
        per_device=per_device,
        require_sandbox=require_sandbox,
    )
    out = _out(json_path)
    verdicts, seen = [], []
    total = len(found.pairs)
    asked = AskedPaths(found.pairs)  # each verdict shown under the paths given here
    store = db_path(db)
    where = f"in the store {display_path(store)}" if store else "(printed above; --db '' stores none)"

    def kept() -> str:
        return f"{len(verdicts)} of {total} verdicts kept {where}; {total - len(verdicts)} not finished"

    with Progress("bench", total, console=out) as shown, progress.keeping(kept):
        # the live line names the solution under way and the step it reached (case 3 of 16 checked)
        steps = progress.ItemSteps(shown, lambda path: display_path(path, solutions))
        with reporting(steps):
            for v in bench(found.pairs, options, executor=executor, address=address):
                verdicts.append(v)  # as evaluated or served: the JSON's
                seen.append(asked.shown(v))  # under the paths given here: the text's
                served = f" (stored verdict from {v.stored.at[:16]})" if v.stored is not None else ""
                path = display_path(seen[-1].task.path, suite)
                steps.done(seen[-1].solution.path)
                shown.finished(
                    f"{v.verdict.value:5s} {path}{served}" + (f" {','.join(v.codes)}" if v.codes else "")
                )
    out.print(bench_table(seen, suite=suite, width=out.width))
    passed = sum(v.passed for v in verdicts)
    errored = sum(v.verdict.value == "error" for v in verdicts)
    say(out, f"correct: {passed}/{len(verdicts)} ({errored} errors)")
    if correctness_only:
        say(out, "fast_p: not measured (--correctness-only times nothing)")
    else:
        results = results_from([v.to_json() for v in verdicts])
        for base in ("eager", "best"):
            figures = ", ".join(
                f"fast_{p:g}={_pct(fast_p(results, p, base, unsolved=len(found.unsolved)))}"
                for p in (0.0, 1.0, 1.5, 2.0)
            )
            say(out, f"vs {base}: {figures}")
        if found.unsolved:
            say(
                out,
                f"fast_p counts the {len(found.unsolved)} task(s) without a solution as incorrect"
                " (KernelBench's rule)",
            )
        note = fast_p_note(results)
        if note:  # wrapped at words to the width (80 in a pipe), as every line of ours
            say_wrapped(out, note, style="dim")
    for task in found.unsolved:
        say(out, f"no solution for {display_path(str(task), suite)}", style="dim")
    _write_json(json_path, [v.to_json() for v in verdicts])
    raise typer.Exit(exits.EXIT_PASS if exit_zero else exits.worst(exits.of_verdict(v) for v in verdicts))


@app.command("audit", epilog=EXIT_HELP)
def audit_command(
    target: Annotated[Path, typer.Argument(help="A task file or a folder of them.")],
    device: Device = "auto",
    json_path: Annotated[
        str | None, typer.Option("--json", help="Write the audit as JSON ('-' for stdout).")
    ] = None,
    seed: Seed = None,
) -> None:
    """Run the negative controls on each task and shape: a task they pass cannot be scored (exit 1)."""
    require_writable(json_path)
    from kernelproof.api import audit, audit_targets
    from kernelproof.console import display_path
    from kernelproof.progress import Progress
    from kernelproof.report.metrics import plural

    out = _out(json_path)
    audits = []
    targets = audit_targets(target)

    def kept() -> str:
        return f"{len(audits)} of {len(targets)} tasks audited (listed above; an audit stores nothing)"

    with Progress("audit", len(targets), console=out) as shown, progress.keeping(kept):
        for a in audit(target, EvalOptions(device=device, seed=seed, db="")):
            audits.append(a)
            name = display_path(a.task)
            if a.error:
                shown.finished(("ERROR", "yellow"), f" {name}: {a.error}")
                continue
            shown.finished(("DEGENERATE", "red") if a.degenerate else ("ok", "green"), f" {name}")
            for r in a.shapes:
                if r.degenerate:
                    shown.note(f"    {r.variant}: {r.summary()}")
    docs = [a.to_json() for a in audits]
    _write_json(json_path, docs if target.is_dir() else docs[0])
    degenerate = sum(a.degenerate for a in audits)
    broken = sum(bool(a.error) for a in audits)
    say(
        out,
        f"{plural(len(audits), 'task')} audited, {degenerate} degenerate"
        + (f", {broken} did not load" if broken else ""),
    )
    codes = [
        exits.EXIT_USAGE if a.error else exits.EXIT_REJECTED if a.degenerate else exits.EXIT_PASS
        for a in audits
    ]
    raise typer.Exit(exits.worst(codes))


@app.command("results", epilog=EXIT_HELP)
def results_command(
    task: Annotated[str | None, typer.Option("--task", help="Filter: substring of the task path.")] = None,
    solution: Annotated[
        str | None, typer.Option("--solution", help="Filter: substring of the solution path.")
    ] = None,
    outcome: Annotated[str | None, typer.Option("--verdict", help="Filter: pass | fail | error.")] = None,
    code: Annotated[
        str | None, typer.Option("--code", help="Filter: a reason code (docs/verdict.md).")
    ] = None,
    limit: Annotated[int, typer.Option("--limit", help="Show at most this many.")] = 50,
    db: Db = None,
    json_path: Annotated[
        str | None, typer.Option("--json", help="Write the matching verdicts as JSON ('-' for stdout).")
    ] = None,
) -> None:
    """List stored verdicts, newest first."""
    require_writable(json_path)
    from kernelproof.api import results
    from kernelproof.console import display_path, results_table
    from kernelproof.verdict import from_json

    found = results(task=task, solution=solution, outcome=outcome, code=code, limit=limit, db=db)
    _write_json(json_path, list(found.documents))
    out = _out(json_path)
    if json_path is None:
        out.print(results_table([from_json(d) for d in found.documents], width=out.width))
    # how many shown of how many stored, then one line per row that does not verify
    for text in found.note.replace(found.path, display_path(found.path)).splitlines():
        say(out, text, limit=WHOLE_LINE_CHARS)


@app.command("compare", epilog=EXIT_HELP)
def compare_command(
    task: Annotated[Path, typer.Argument(help="The task file.")],
    a: Annotated[Path, typer.Argument(help="Solution A.")],
    b: Annotated[Path, typer.Argument(help="Solution B.")],
    device: Device = "auto",
    seed: Seed = None,
    time_budget: Annotated[float, typer.Option("--time-budget", help="Seconds of timing (cap).")] = 20.0,
) -> None:
    """Paired speedup of B over A (both verified first), interleaved in one session."""
    require_files(task, a, b, what=("task", "solution A", "solution B"))  # before torch is imported
    from kernelproof.api import compare, reporting
    from kernelproof.progress import CompareSteps, Progress

    options = EvalOptions(device=device, seed=seed, time_budget_s=time_budget, db="")
    with Progress("compare", console=stderr) as shown, progress.keeping(lambda: "nothing was kept"):
        steps = CompareSteps(shown)
        with reporting(steps.phase):
            result = compare(task, a, b, options)
    say_wrapped(console, result.summary(), limit=REASON_CHARS)  # a busy machine's advice comes last
    raise typer.Exit(exits.EXIT_PASS if result.ok else result.exit_code)


@app.command("ceilings", epilog=EXIT_HELP)
def ceilings_command(
    device: Annotated[str, typer.Option("--device", help="cuda | cuda:N")] = "cuda",
    refresh: Annotated[bool, typer.Option("--refresh", help="Measure again even if cached.")] = False,
) -> None:
    """Measure (once per device model) copy bandwidth and matmul peaks; show them beside the datasheet."""
    from kernelproof.api import ceilings

    with (
        console.status("measuring the device's ceilings...")
        if sys.stdout.isatty()
        else contextlib.nullcontext()
    ):
        found = ceilings(device, refresh=refresh)
    sheet = f" (datasheet {found.datasheet_tbps} TB/s)" if found.datasheet_tbps is not None else ""
    say(console, f"{found.name}: copy {found.copy_tbps:.2f} TB/s{sheet}")
    for unit, tflops in found.matmul_tflops.items():
        sheet = f" (datasheet {found.datasheet_tflops[unit]})" if unit in found.datasheet_tflops else ""
        say(console, f"  matmul {unit}: {tflops:.0f} TFLOP/s{sheet}")
    say(console, f"{'measured now, cached' if found.measured_now else 'cached'} at {found.cache_path}")


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


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.0%}"


def _write_json(path: str | None, doc: object) -> None:
    if not path:
        return
    text = json.dumps(doc, indent=2, allow_nan=False)
    if path == "-":
        sys.stdout.write(text + "\n")
        return
    try:
        Path(path).write_text(text + "\n")
    except OSError as exc:  # checked before the run (require_writable); this is what changed since
        raise UsageError(f"cannot write --json {path}: {exc.strerror or exc}") from None


def main() -> None:
    if os.geteuid() != 0:  # workers share our uid: close our /proc entries to them (never done by api)
        from kernelproof.sandbox.identity import make_parent_nondumpable

        make_parent_nondumpable()
    sys.stdout = ClosedPipeSafe(sys.stdout)  # type: ignore[assignment]
    with progress.interruptible():  # Ctrl-C: one line of what was kept, exit 130 within 5 s
        code = run()
    sys.stdout.flush()
    sys.exit(code)


def run(args: list[str] | None = None) -> int:
    """Run the command line on ``args`` (default: sys.argv) and return its exit code; every error
    is printed to stderr in one wording, ``error: <message>``, and mapped by kernelproof/exits.py."""
    global console, stderr
    console, stderr = make_console(), make_console(stderr=True)
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
