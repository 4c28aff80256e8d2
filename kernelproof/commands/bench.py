"""``kernelproof bench SUITE --solutions DIR``: every task of a suite judged with its solution,
registered by ``kernelproof.cli``. A thin layer over :func:`kernelproof.api.bench`
(docs/architecture.md, house rule 10), in its steps: find the pairs, judge them with a line each as
they finish, print the table and fast_p, write the JSON. For a KernelBench run folder:
``kernelproof kernelbench`` (commands/kernelbench.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kernelproof import cli_progress, exits
from kernelproof.commands.cli_options import (
    Address,
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
    Executor,
    ExitZero,
    Fresh,
    ImportTimeout,
    KernelbenchCompat,
    PerDevice,
    Policy,
    Precision,
    RefuseRandom,
    RequireSandbox,
    Seed,
    SeedsPerCase,
    ShapeVariants,
    TimeBudget,
    TimeInterpreted,
    Timeout,
    TimeWhenBusy,
    TimingTimeout,
    VerdictsJson,
    eval_options,
)
from kernelproof.commands.output import out_console, write_json
from kernelproof.console import say, say_wrapped
from kernelproof.preflight import require_writable

FAST_P_AT = (0.0, 1.0, 1.5, 2.0)  # the speedup thresholds fast_p is printed at


def bench_command(
    ctx: typer.Context,
    suite: Annotated[Path, typer.Argument(help="Folder of task files (searched recursively).")],
    solutions: Annotated[
        Path, typer.Option("--solutions", help="Folder with a solution of the same relative path per task.")
    ],
    device: Device = "auto",
    json_path: VerdictsJson = None,
    baselines: Baselines = "eager",
    seed: Seed = None,
    correctness_only: CorrectnessOnly = False,
    cpu_threads: CpuThreads = 1,
    time_when_busy: TimeWhenBusy = False,
    time_interpreted: TimeInterpreted = False,
    kernelbench_compat: KernelbenchCompat = False,
    eval_mode: EvalMode = False,
    time_budget: TimeBudget = 20.0,
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
    executor: Executor = "local",
    address: Address = None,
    build_cache: BuildCacheOpt = None,
    build_workers: BuildWorkers = 0,
    per_device: PerDevice = 1,
    require_sandbox: RequireSandbox = False,
    exit_zero: ExitZero = False,
) -> None:
    """Evaluate every task of SUITE with the solution at the same relative path under --solutions;
    print a table and fast_p. For a KernelBench run folder: kernelproof kernelbench."""
    require_writable(json_path)
    from kernelproof.api import suite_pairs

    found = suite_pairs(suite, solutions, only or ())
    options = eval_options(ctx.params)
    out = out_console(json_path)
    verdicts, seen = _judge(found.pairs, options, suite, solutions, out, executor=executor, address=address)
    _print_summary(out, verdicts, seen, found, suite, correctness_only=correctness_only)
    write_json(json_path, [v.to_json() for v in verdicts])
    raise typer.Exit(exits.EXIT_PASS if exit_zero else exits.worst(exits.of_verdict(v) for v in verdicts))


def _judge(pairs, options, suite: Path, solutions: Path, out, *, executor: str, address: str | None):
    """Every pair judged (or served from the store), a line each as it finishes; Ctrl-C says how
    many were kept. Returns the verdicts as evaluated (the JSON's) and as shown under the paths
    given here (the table's)."""
    from kernelproof.api import bench, db_path, reporting
    from kernelproof.cli_progress import Progress
    from kernelproof.console import AskedPaths, display_path

    verdicts, seen = [], []
    total = len(pairs)
    asked = AskedPaths(pairs)  # each verdict shown under the paths given here
    store = db_path(options.db)
    where = f"in the store {display_path(store)}" if store else "(printed above; --db '' stores none)"

    def kept() -> str:
        return f"{len(verdicts)} of {total} verdicts kept {where}; {total - len(verdicts)} not finished"

    with Progress("bench", total, console=out) as shown, cli_progress.keeping(kept):
        # the live line names the solution under way and the step it reached (case 3 of 16 checked)
        steps = cli_progress.ItemSteps(shown, lambda path: display_path(path, solutions))
        with reporting(steps):
            for v in bench(pairs, options, executor=executor, address=address):
                verdicts.append(v)  # as evaluated or served: the JSON's
                seen.append(asked.shown(v))  # under the paths given here: the text's
                served = f" (stored verdict from {v.stored.at[:16]})" if v.stored is not None else ""
                path = display_path(seen[-1].task.path, suite)
                steps.done(seen[-1].solution.path)
                shown.finished(
                    f"{v.verdict.value:5s} {path}{served}" + (f" {','.join(v.codes)}" if v.codes else "")
                )
    return verdicts, seen


def _print_summary(out, verdicts, seen, found, suite: Path, *, correctness_only: bool) -> None:
    """The table, how many are correct, fast_p against eager and the best baseline (KernelBench's
    rule: a task without a solution counts as incorrect), and the tasks without a solution."""
    from kernelproof.console import bench_table, display_path
    from kernelproof.report.scores import fast_p, fast_p_note, results_from

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
                for p in FAST_P_AT
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


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.0%}"
