"""The ``kernelproof`` command: a thin layer over :mod:`kernelproof.api` (house rule 10).

Exit codes (every verb):

    0  pass (eval), done (others)
    1  the candidate was rejected (eval), or a claim does not hold (verify)
    2  a bad task or misuse: missing file, bad option, a task that does not load
    3  an internal error of kernelproof
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from kernelproof.console import make_console, say
from kernelproof.errors import KernelproofError, StoreError, TaskError, UsageError
from kernelproof.options import EvalOptions, normalize_baselines

EXIT_PASS, EXIT_REJECTED, EXIT_USAGE, EXIT_INTERNAL = 0, 1, 2, 3

app = typer.Typer(
    name="kernelproof",
    help="Prove whether a GPU kernel is correct and how much faster it really is.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
console = make_console()


def _options(
    device: str,
    baselines: str,
    seed: int | None,
    correctness_only: bool,
    kernelbench_compat: bool,
    eval_mode: bool,
    time_budget: float,
    fresh: bool,
    db: str | None,
    samples: bool,
    timeout: float,
) -> EvalOptions:
    try:
        names = normalize_baselines(baselines.split(","))
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    return EvalOptions(
        device=device,
        baselines=names,
        seed=seed,
        correctness_only=correctness_only,
        kernelbench_compat=kernelbench_compat,
        eval_mode=eval_mode,
        time_budget_s=time_budget,
        fresh=fresh,
        db=db,
        keep_samples=samples,
        timeout_s=timeout,
    )


Device = Annotated[str, typer.Option("--device", help="auto | cuda | cuda:N | cpu")]
Baselines = Annotated[
    str,
    typer.Option("--baselines", help="eager, compile (=compile:default), compile:max-autotune-no-cudagraphs"),
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
        "--db", help="SQLite results store (default under ~/.local/share/kernelproof; '' for none)."
    ),
]


@app.command("eval")
def eval_command(
    task: Annotated[
        Path, typer.Argument(help="KernelBench-format task file (Model, get_inputs, get_init_inputs).")
    ],
    solution: Annotated[Path, typer.Argument(help="Solution file defining ModelNew.")],
    device: Device = "auto",
    json_path: Annotated[
        str | None, typer.Option("--json", help="Write the verdict JSON here ('-' for stdout).")
    ] = None,
    baselines: Baselines = "eager",
    seed: Seed = None,
    correctness_only: Annotated[
        bool, typer.Option("--correctness-only", help="Check correctness; skip timing.")
    ] = False,
    kernelbench_compat: Annotated[
        bool, typer.Option("--kernelbench-compat", help="Also report KernelBench's own acceptance rule.")
    ] = False,
    eval_mode: Annotated[
        bool, typer.Option("--eval-mode", help="Run reference and candidate in eval() mode.")
    ] = False,
    time_budget: Annotated[
        float, typer.Option("--time-budget", help="Seconds of timing per timed shape (cap).")
    ] = 20.0,
    samples: Annotated[bool, typer.Option("--samples", help="Keep raw timing samples in the JSON.")] = False,
    sanitize: Annotated[
        bool, typer.Option("--sanitize", help="Run the first case under compute-sanitizer (GPU; slow).")
    ] = False,
    shape_variants: Annotated[
        str,
        typer.Option(
            "--shape-variants",
            help="probe: the task's shapes decide, perturbed ones are also run (a failure there is the "
            "flag shape_specialized); auto: perturbed shapes are in the contract; task: the task's alone",
        ),
    ] = "probe",
    steady: Annotated[
        bool, typer.Option("--steady", help="Also measure the steady (back-to-back) regime, reported apart.")
    ] = False,
    fresh: Annotated[
        bool, typer.Option("--fresh", help="Do not serve an identical earlier evaluation from the store.")
    ] = False,
    db: Db = None,
    timeout: Annotated[
        float, typer.Option("--timeout", help="Seconds a worker may take for one step before it is killed.")
    ] = 600.0,
    build_cache: BuildCacheOpt = None,
    build_workers: BuildWorkers = 0,
    require_sandbox: Annotated[
        bool,
        typer.Option(
            "--require-sandbox",
            help="Refuse to evaluate unless every containment layer holds (python -m kernelproof.sandbox).",
        ),
    ] = False,
) -> None:
    """Evaluate SOLUTION against TASK: one verdict, with reasons, cases, times and speedups."""
    from kernelproof.api import evaluate
    from kernelproof.console import print_verdict

    opts = _options(
        device,
        baselines,
        seed,
        correctness_only,
        kernelbench_compat,
        eval_mode,
        time_budget,
        fresh,
        db,
        samples,
        timeout,
    )
    if shape_variants not in ("probe", "task", "auto"):
        raise UsageError(f"--shape-variants must be probe, auto or task, not {shape_variants!r}")
    if build_workers < 0:
        raise UsageError("--build-workers must be 0 (automatic) or more")
    opts = opts.replace(
        steady=steady,
        shape_variants=shape_variants,
        sanitize=sanitize,
        build_cache=build_cache,
        build_workers=build_workers,
        require_sandbox=require_sandbox,
    )
    with (
        console.status("evaluating (building, checking cases, timing)...", spinner="dots")
        if sys.stdout.isatty()
        else _null()
    ):
        verdict = evaluate(task, solution, opts)
    _write_json(json_path, verdict.to_json())
    if json_path != "-":
        print_verdict(verdict, console)
    if verdict.verdict.value == "error":
        raise typer.Exit(EXIT_USAGE)
    raise typer.Exit(EXIT_PASS if verdict.passed else EXIT_REJECTED)


@app.command("bench")
def bench_command(
    suite: Annotated[Path, typer.Argument(help="Folder of task files (searched recursively).")],
    solutions: Annotated[
        Path, typer.Option("--solutions", help="Folder with a solution of the same relative path per task.")
    ],
    device: Device = "auto",
    json_path: Annotated[
        str | None, typer.Option("--json", help="Write all verdicts here as a JSON list.")
    ] = None,
    baselines: Baselines = "eager",
    seed: Seed = None,
    correctness_only: Annotated[bool, typer.Option("--correctness-only")] = False,
    time_budget: Annotated[
        float, typer.Option("--time-budget", help="Seconds of timing per timed shape (cap).")
    ] = 10.0,
    fresh: Annotated[bool, typer.Option("--fresh")] = False,
    db: Db = None,
    timeout: Annotated[float, typer.Option("--timeout")] = 600.0,
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
) -> None:
    """Evaluate every task of SUITE with its solution (KernelBench run layout); print a table and fast_p."""
    from kernelproof.api import evaluate_many
    from kernelproof.console import bench_table
    from kernelproof.report.metrics import fast_p, results_from

    if not suite.is_dir() or not solutions.is_dir():
        raise UsageError(f"{suite if not suite.is_dir() else solutions} is not a folder")
    pairs, missing = [], []
    for task in sorted(suite.rglob("*.py")):
        if task.name.startswith("_"):
            continue
        rel = str(task.relative_to(suite))
        if only and not any(o in rel for o in only):
            continue
        sol = solutions / task.relative_to(suite)
        (pairs if sol.is_file() else missing).append((task, sol))
    if not pairs:
        raise UsageError(f"no task in {suite} has a solution of the same relative path under {solutions}")
    opts = _options(
        device, baselines, seed, correctness_only, False, False, time_budget, fresh, db, False, timeout
    ).replace(
        seeds_per_case=seeds_per_case,
        build_cache=build_cache,
        build_workers=build_workers,
        per_device=per_device,
    )
    if build_workers < 0:
        raise UsageError("--build-workers must be 0 (automatic) or more")
    verdicts = []
    if executor == "ray" and per_device != 1:
        raise UsageError("--per-device applies to the local executor; a Ray actor evaluates one at a time")
    if executor == "ray":
        from kernelproof.executors.ray_executor import RayOptions, evaluate_many_ray

        stream = evaluate_many_ray(pairs, opts, RayOptions(address=address))
    elif executor == "local":
        stream = evaluate_many(pairs, opts)
    else:
        raise UsageError(f"--executor must be local or ray, not {executor!r}")
    for v in stream:
        verdicts.append(v)
        say(console, f"[{len(verdicts)}/{len(pairs)}] {v.verdict.value:5s} {v.task.path} {','.join(v.codes)}")
    console.print(bench_table(verdicts))
    passed = sum(v.passed for v in verdicts)
    console.print(
        f"correct: {passed}/{len(verdicts)} ({sum(v.verdict.value == 'error' for v in verdicts)} errors)"
    )
    results = results_from([v.to_json() for v in verdicts])
    if correctness_only:
        console.print("fast_p: not measured (--correctness-only times nothing)", highlight=False)
    else:
        for base in ("eager", "best"):
            line = ", ".join(f"fast_{p:g}={_pct(fast_p(results, p, base))}" for p in (0.0, 1.0, 1.5, 2.0))
            console.print(f"vs {base}: {line}", highlight=False)
    for task, _ in missing:
        say(console, f"no solution for {task}", style="dim")
    _write_json(json_path, [v.to_json() for v in verdicts])


@app.command("audit")
def audit_command(
    target: Annotated[Path, typer.Argument(help="A task file or a folder of them.")],
    device: Device = "auto",
    json_path: Annotated[
        str | None, typer.Option("--json", help="Write the audit as JSON ('-' for stdout).")
    ] = None,
    seed: Seed = None,
) -> None:
    """Run the negative controls on each task and shape: a task they pass cannot be scored."""
    import secrets

    import torch

    from kernelproof.executors.local import resolve_devices
    from kernelproof.task import load_task, variants_for
    from kernelproof.verify.audit import audit_task

    files = sorted(target.rglob("*.py")) if target.is_dir() else [target]
    dev = torch.device(resolve_devices(device)[0])
    docs, degenerate = [], 0
    for f in files:
        if f.name.startswith("_"):
            continue
        task = load_task(f)
        reports = audit_task(
            task, dev, variants_for(task, dev.type), seed if seed is not None else secrets.randbits(62)
        )
        doc = {
            "task": str(f),
            "degenerate": any(r.degenerate for r in reports),
            "controls": [dict(c, shape=r.variant) for r in reports for c in r.to_json()["controls"]],
            "shapes": [r.to_json() for r in reports],
        }
        degenerate += doc["degenerate"]
        docs.append(doc)
        if json_path != "-":
            mark = ("DEGENERATE", "red") if doc["degenerate"] else ("ok", "green")
            say(console, mark, f" {f}")
            for r in reports:
                if r.degenerate:
                    say(console, f"    {r.variant}: {r.summary()}")
    _write_json(json_path, docs if target.is_dir() else docs[0])
    if json_path != "-":
        console.print(f"{len(docs)} tasks audited, {degenerate} degenerate")
    raise typer.Exit(EXIT_REJECTED if degenerate else EXIT_PASS)


@app.command("results")
def results_command(
    task: Annotated[str | None, typer.Option("--task", help="Filter: substring of the task path.")] = None,
    solution: Annotated[
        str | None, typer.Option("--solution", help="Filter: substring of the solution path.")
    ] = None,
    outcome: Annotated[str | None, typer.Option("--verdict", help="Filter: pass | fail | error.")] = None,
    code: Annotated[str | None, typer.Option("--code", help="Filter: a reason code.")] = None,
    limit: Annotated[int, typer.Option("--limit")] = 50,
    db: Db = None,
    json_path: Annotated[
        str | None, typer.Option("--json", help="Write the matching verdicts as JSON.")
    ] = None,
) -> None:
    """List stored verdicts, newest first."""
    from kernelproof.console import bench_table
    from kernelproof.store import Store, default_db_path
    from kernelproof.verdict import from_json

    store = Store(db or default_db_path())
    docs = store.query(task=task, solution=solution, outcome=outcome, code=code, limit=limit)
    if json_path:
        _write_json(json_path, docs)
    else:
        console.print(bench_table([from_json(d) for d in docs]))
        say(console, store.listing_note(len(docs), task=task, solution=solution, outcome=outcome, code=code))


@app.command("compare")
def compare_command(
    task: Annotated[Path, typer.Argument()],
    a: Annotated[Path, typer.Argument(help="Solution A.")],
    b: Annotated[Path, typer.Argument(help="Solution B.")],
    device: Device = "auto",
    seed: Seed = None,
    time_budget: Annotated[float, typer.Option("--time-budget")] = 20.0,
) -> None:
    """Paired speedup of B over A (both verified first), interleaved in one session."""
    from kernelproof.api import compare

    result = compare(task, a, b, EvalOptions(device=device, seed=seed, time_budget_s=time_budget, db=""))
    say(console, result.summary())
    raise typer.Exit(EXIT_PASS if result.ok else EXIT_REJECTED)


@app.command("ceilings")
def ceilings_command(
    device: Annotated[str, typer.Option("--device", help="cuda | cuda:N")] = "cuda",
    refresh: Annotated[bool, typer.Option("--refresh", help="Measure again even if cached.")] = False,
) -> None:
    """Measure (once per device model) copy bandwidth and matmul peaks; show them beside the datasheet."""
    import torch

    from kernelproof.measure import ceilings
    from kernelproof.measure.roofline import device_spec

    if not torch.cuda.is_available():
        raise UsageError("ceilings are measured on a CUDA device; none is visible")
    dev = "cuda:0" if device == "cuda" else device
    name = torch.cuda.get_device_name(torch.device(dev))
    doc = None if refresh else ceilings.load(name)
    if doc is None:
        with console.status(f"measuring {name}..."):
            doc = ceilings.measure(dev)
    spec = device_spec(name)
    console.print(
        f"{name}: copy {doc['copy_bandwidth_TBps']:.2f} TB/s"
        + (f" (datasheet {spec.datasheet_tbps} TB/s)" if spec else ""),
        highlight=False,
    )
    for k, v in doc["matmul_TFLOPs"].items():
        ds = f" (datasheet {spec.datasheet_tflops.get(k)})" if spec else ""
        console.print(f"  matmul {k}: {v:.0f} TFLOP/s{ds}", highlight=False)
    console.print(f"cached at {ceilings.cache_path(name)}", highlight=False)


def _register_optional() -> None:
    """Verbs whose modules bring optional dependencies register without importing them eagerly."""
    try:
        from kernelproof.report.cli import certify_command, keys_command, report_command, verify_command

        app.command("report")(report_command)
        app.command("certify")(certify_command)
        app.command("verify")(verify_command)
        app.command("keys")(keys_command)
    except ImportError:  # pragma: no cover - the report package is part of the core install
        pass
    try:
        from kernelproof.agent.cli import optimize_command

        app.command("optimize")(optimize_command)
    except ImportError:
        pass
    try:
        from kernelproof.build.cli import cache_app

        app.add_typer(cache_app, name="cache")
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
    else:
        Path(path).write_text(text + "\n")


class _null:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def main() -> None:
    _register_optional()
    if os.geteuid() != 0:  # workers share our uid: close our /proc entries to them (never done by api)
        from kernelproof.sandbox.identity import make_parent_nondumpable

        make_parent_nondumpable()
    try:
        rv = app(standalone_mode=False)
        sys.exit(rv if isinstance(rv, int) else 0)
    except typer.Exit as e:
        sys.exit(e.exit_code)
    except (UsageError, TaskError) as exc:
        say(console, ("error:", "red"), f" {exc}")
        sys.exit(EXIT_USAGE)
    except StoreError as exc:
        say(console, ("store error:", "red"), f" {exc}")
        sys.exit(EXIT_INTERNAL)
    except KernelproofError as exc:
        say(console, ("error:", "red"), f" {exc}")
        sys.exit(EXIT_INTERNAL)
    except Exception as exc:  # the CLI parser's usage errors, and anything unexpected
        if hasattr(exc, "show") and hasattr(exc, "exit_code"):  # click/typer usage errors
            exc.show()
            sys.exit(EXIT_USAGE)
        if type(exc).__name__ == "Abort":
            sys.exit(EXIT_USAGE)
        import traceback

        from kernelproof.text import terminal

        sys.stderr.write(terminal(traceback.format_exc(), multiline=True) + "\n")
        console.print("[red]internal error[/]: please report it with the traceback above")
        sys.exit(EXIT_INTERNAL)


if __name__ == "__main__":
    main()
