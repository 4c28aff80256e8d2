"""The options the evaluating verbs share (eval, bench, kernelbench, ...), declared once.

Each is a typed ``Annotated`` alias a verb's signature names, so one flag has one spelling and one
help text in every verb that takes it."""

from __future__ import annotations

from typing import Annotated

import typer

Device = Annotated[str, typer.Option("--device", help="auto | cuda | cuda:N | cpu")]
Baselines = Annotated[
    str,
    typer.Option(
        "--baselines",
        help="Comma-separated: eager, compile (=compile:default), compile:max-autotune-no-cudagraphs. "
        "Default: eager alone.",
    ),
]
Seed = Annotated[
    int | None,
    typer.Option("--seed", help="Reproduce a run (default: a secret seed, recorded in the verdict)."),
]
SeedsPerCase = Annotated[
    int, typer.Option("--seeds-per-case", help="Hidden seeds per (shape, distribution).")
]
BuildCacheOpt = Annotated[
    str | None,
    typer.Option(
        "--build-cache",
        help="Build cache for CUDA and native solutions (default: $KERNELPROOF_CACHE_DIR or ~/.cache/kernelproof/builds).",
    ),
]
BuildWorkers = Annotated[
    int,
    typer.Option(
        "--build-workers", help="Builder processes for CUDA and native solutions (0: one per 4 cores)."
    ),
]
Db = Annotated[
    str | None,
    typer.Option(
        "--db",
        help="SQLite results store (default: $KERNELPROOF_DB, else "
        "~/.local/share/kernelproof/results.sqlite; '' for none).",
    ),
]
Fresh = Annotated[
    bool, typer.Option("--fresh", help="Do not serve an identical earlier evaluation from the store.")
]
Timeout = Annotated[
    float,
    typer.Option(
        "--timeout", help="Ceiling in seconds on any one worker step (each phase's limit is capped by it)."
    ),
]
ImportTimeout = Annotated[
    float,
    typer.Option("--import-timeout", help="Seconds for importing the solution and constructing ModelNew."),
]
CaseTimeout = Annotated[
    float, typer.Option("--case-timeout", help="Seconds for one correctness case (both runs).")
]
TimingTimeout = Annotated[float, typer.Option("--timing-timeout", help="Seconds for one timing request.")]
EvaluationTimeout = Annotated[
    float, typer.Option("--evaluation-timeout", help="Seconds for the whole evaluation, wall clock.")
]
CorrectnessOnly = Annotated[bool, typer.Option("--correctness-only", help="Check correctness; skip timing.")]
CpuThreads = Annotated[
    int,
    typer.Option(
        "--cpu-threads",
        min=1,
        help="Cores (and threads) for the candidate's worker and, apart from them, for each baseline's.",
    ),
]
TimeWhenBusy = Annotated[
    bool,
    typer.Option(
        "--time-when-busy",
        help="Time even when the machine is too busy to (flagged), instead of the error machine_busy.",
    ),
]
TimeInterpreted = Annotated[
    bool,
    typer.Option(
        "--time-interpreted",
        help="On the CPU, time kernels that run in Triton's interpreter too (no speed claim; slow).",
    ),
]
KernelbenchCompat = Annotated[
    bool, typer.Option("--kernelbench-compat", help="Also report KernelBench's own acceptance rule.")
]
EvalMode = Annotated[bool, typer.Option("--eval-mode", help="Run reference and candidate in eval() mode.")]
ShapeVariants = Annotated[
    str,
    typer.Option(
        "--shape-variants",
        help="probe: the task's shapes decide, perturbed ones are also run (a failure there is the "
        "flag shape_specialized); auto: perturbed shapes are in the contract; task: the task's alone",
    ),
]
Policy = Annotated[
    str | None,
    typer.Option(
        "--policy",
        help="Kernel policy: strict (80 % of GPU time in the solution's kernels) or library-ok "
        "(library GEMMs and convolutions may stay). Default: the task's own.",
    ),
]
PRECISION_CHOICES = ("fp32", "fp16", "bf16")


def _precision_choice(value: str | None) -> str | None:
    """--precision refused at the command line unless it names one of KernelBench's precisions."""
    if value is not None and value not in PRECISION_CHOICES:
        raise typer.BadParameter(f"{value!r} is not one of {', '.join(PRECISION_CHOICES)}")
    return value


Precision = Annotated[
    str | None,
    typer.Option(
        "--precision",
        callback=_precision_choice,
        help="Judge in this precision (KernelBench's flag): the reference's parameters and every "
        "floating input are cast to it, for the reference, the baselines and the candidate alike. "
        "Default: the task's declared precision, else the dtypes its get_inputs() and Model make.",
    ),
]
RefuseRandom = Annotated[
    bool,
    typer.Option(
        "--refuse-random-reference",
        help="Refuse a task whose reference is random (dropout in training mode) as task_error, "
        "instead of evaluating it in eval() mode with the flag random_reference.",
    ),
]
RequireSandbox = Annotated[
    bool,
    typer.Option(
        "--require-sandbox",
        help="Refuse to evaluate unless every containment layer holds (python -m kernelproof.sandbox).",
    ),
]
JsonOut = Annotated[
    str | None, typer.Option("--json", help="Write the result as JSON here ('-' for stdout).")
]
