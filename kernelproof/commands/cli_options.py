"""Every option of the evaluating verbs (eval, bench, compare, audit, kernelbench, serve, certify,
optimize), declared once, and the one builder from the parsed flags to :class:`EvalOptions`.

Each option is a typed ``Annotated`` alias a verb's signature names, so one flag has one spelling,
one help text and one default in every verb that takes it; :func:`eval_options` reads the parsed
flags of any verb into the options the api takes, so what a flag means is written once too
(tests/commands/test_cli_options.py holds both to it). The defaults are :class:`EvalOptions`' own: the
command line and the api evaluate alike when nothing is asked (docs/architecture.md, house rule 10).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

import typer

from kernelproof.options import EvalOptions

DEFAULTS = EvalOptions()

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
TimeBudget = Annotated[
    float,
    typer.Option(
        "--time-budget",
        help="Seconds of timing per timed shape: a cap (timing stops earlier once the speedup's "
        "interval is narrow).",
    ),
]
MaxRounds = Annotated[
    int, typer.Option("--max-rounds", help="Most interleaved timing rounds per timed shape.")
]
Samples = Annotated[bool, typer.Option("--samples", help="Keep raw timing samples in the JSON.")]
Sanitize = Annotated[
    bool, typer.Option("--sanitize", help="Run the first case under compute-sanitizer (GPU; slow).")
]
Steady = Annotated[
    bool, typer.Option("--steady", help="Also measure the steady (back-to-back) regime, reported apart.")
]
PerDevice = Annotated[
    int,
    typer.Option(
        "--per-device",
        help="Evaluations in flight per device: their untimed work overlaps, their timing never does.",
    ),
]
Executor = Annotated[str, typer.Option("--executor", help="local (one worker per GPU) | ray")]
Address = Annotated[str | None, typer.Option("--address", help="Ray cluster address (with --executor ray).")]
ExitZero = Annotated[
    bool,
    typer.Option(
        "--exit-zero",
        help="Exit 0 whatever the verdicts (for scripts that only want the table); misuse still exits 2.",
    ),
]
VerdictsJson = Annotated[
    str | None, typer.Option("--json", help="Write every verdict here as a JSON list ('-' for stdout).")
]


# The verb's parameter name -> the EvalOptions field it sets. A parameter of a verb that is not
# here is the verb's own (--only, --executor, --kernelbench, ...), never an evaluation option.
FLAG_FIELDS = {
    "device": "device",
    "baselines": "baselines",
    "seed": "seed",
    "correctness_only": "correctness_only",
    "cpu_threads": "cpu_threads",
    "time_when_busy": "time_when_busy",
    "time_interpreted": "time_interpreted",
    "kernelbench_compat": "kernelbench_compat",
    "eval_mode": "eval_mode",
    "refuse_random_reference": "refuse_random_reference",
    "shape_variants": "shape_variants",
    "policy": "policy",
    "precision": "precision",
    "seeds_per_case": "seeds_per_case",
    "time_budget": "time_budget_s",
    "max_rounds": "max_rounds",
    "samples": "keep_samples",
    "steady": "steady",
    "sanitize": "sanitize",
    "fresh": "fresh",
    "db": "db",
    "timeout": "timeout_s",
    "import_timeout": "import_timeout_s",
    "case_timeout": "case_timeout_s",
    "timing_timeout": "timing_timeout_s",
    "evaluation_timeout": "evaluation_timeout_s",
    "build_cache": "build_cache",
    "build_workers": "build_workers",
    "per_device": "per_device",
    "require_sandbox": "require_sandbox",
}


def eval_options(flags: Mapping[str, Any], **fixed: Any) -> EvalOptions:
    """The :class:`EvalOptions` a verb's parsed flags ask for (``typer.Context.params``): every
    evaluation flag the verb takes, read the one way; ``fixed`` sets what the verb decides itself
    (``db=""`` for a verb that stores nothing). A flag the verb does not take keeps the api's default.

    The values are not checked here: :func:`kernelproof.preflight.checked_options` checks them (and
    normalises the baselines) in the one place the api and every verb share."""
    values = {FLAG_FIELDS[name]: value for name, value in flags.items() if name in FLAG_FIELDS}
    if "baselines" in values:
        values["baselines"] = baseline_names(values["baselines"])
    if "max_rounds" in values:  # a cap under the floor lowers the floor (the floor never exceeds it)
        values["min_rounds"] = min(DEFAULTS.min_rounds, values["max_rounds"])
    return EvalOptions(**{**values, **fixed})


def baseline_names(text: str) -> tuple[str, ...]:
    """--baselines as given: split at commas (checked and normalised by checked_options)."""
    return tuple(text.split(","))
