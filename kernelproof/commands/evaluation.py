"""``kernelproof eval`` and ``kernelproof compare``: one solution judged, or two timed against each
other; registered by ``kernelproof.cli``. Thin layers over :func:`kernelproof.api.evaluate` and
:func:`kernelproof.api.compare` (docs/architecture.md, house rule 10)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from kernelproof import cli_progress, exits
from kernelproof.commands.cli_options import (
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
    Samples,
    Sanitize,
    Seed,
    SeedsPerCase,
    ShapeVariants,
    Steady,
    TimeBudget,
    TimeInterpreted,
    Timeout,
    TimeWhenBusy,
    TimingTimeout,
    eval_options,
)
from kernelproof.commands.output import out_console, write_json
from kernelproof.console import REASON_CHARS, make_console, say_wrapped
from kernelproof.preflight import require_files, require_writable


def eval_command(
    ctx: typer.Context,
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
    time_budget: TimeBudget = 20.0,
    samples: Samples = False,
    seeds_per_case: SeedsPerCase = 2,
    sanitize: Sanitize = False,
    shape_variants: ShapeVariants = "probe",
    policy: Policy = None,
    precision: Precision = None,
    refuse_random_reference: RefuseRandom = False,
    steady: Steady = False,
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

    options = eval_options(ctx.params)
    console, stderr = make_console(), make_console(stderr=True)
    busy = sys.stdout.isatty() and json_path != "-"
    # On a terminal a live line with the phase reached; piped, a line per phase on stderr (stdout
    # keeps the verdict alone).
    shown = cli_progress.Progress("eval", console=console if busy else stderr)
    with (
        shown,
        reporting(cli_progress.PhaseLine(shown) if shown.live else cli_progress.phase_line),
        cli_progress.keeping(
            lambda: "nothing was kept (the evaluation in flight was stopped; no verdict stored)"
        ),
    ):
        verdict = evaluate(task, solution, options)
    write_json(json_path, verdict.to_json())
    print_verdict(verdict, out_console(json_path))
    raise typer.Exit(exits.of_verdict(verdict))


def compare_command(
    ctx: typer.Context,
    task: Annotated[Path, typer.Argument(help="The task file.")],
    a: Annotated[Path, typer.Argument(help="Solution A.")],
    b: Annotated[Path, typer.Argument(help="Solution B.")],
    device: Device = "auto",
    seed: Seed = None,
    time_budget: TimeBudget = 20.0,
) -> None:
    """Paired speedup of B over A (both verified first), interleaved in one session."""
    require_files(task, a, b, what=("task", "solution A", "solution B"))  # before torch is imported
    from kernelproof.api import compare, reporting
    from kernelproof.cli_progress import CompareSteps, Progress

    options = eval_options(ctx.params, db="")
    with (
        Progress("compare", console=make_console(stderr=True)) as shown,
        cli_progress.keeping(lambda: "nothing was kept"),
    ):
        steps = CompareSteps(shown)
        with reporting(steps.phase):
            result = compare(task, a, b, options)
    say_wrapped(make_console(), result.summary(), limit=REASON_CHARS)  # a busy machine's advice comes last
    raise typer.Exit(exits.EXIT_PASS if result.ok else result.exit_code)
