"""``kernelproof kernelbench RUN_DIR``: judge a KernelBench run folder as it is, registered by
``kernelproof.cli``.

A thin layer over :func:`kernelproof.api.kernelbench` (house rule 10): it finds the samples, runs
them as ``bench`` does (in parallel over the GPUs, served from the store when judged before),
prints the table and KernelBench's scores, and writes KernelBench's own files into RUN_DIR
(kernelproof/report/kernelbench.py says which and in what shape; docs/kernelbench.md shows the
commands). Exit codes, from the one table (kernelproof/exits.py): the worst over the samples
judged (1 when any was rejected), 2 for misuse, 0 with ``--exit-zero``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated

import typer

from kernelproof import exits
from kernelproof.commands.options import (  # noqa: F401 - typer reads the signature's names here
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
    KernelbenchCompat,
    Policy,
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
from kernelproof.console import display_path, kernelbench_table, make_console, say, say_wrapped
from kernelproof.options import EvalOptions
from kernelproof.usage import require_writable

KEEP_SUFFIX = ".before-kernelproof.json"  # where a results file kernelproof did not write is kept


def kernelbench_command(
    run_dir: Annotated[
        Path, typer.Argument(help="KernelBench run folder: level_<L>_problem_<P>_sample_<S>_kernel.py files.")
    ],
    level: Annotated[int, typer.Option("--level", help="KernelBench level of the run (1, 2, 3, ...).")],
    kernelbench: Annotated[
        Path,
        typer.Option(
            "--kernelbench", help="Root of a KernelBench checkout (the folder holding KernelBench/level1)."
        ),
    ],
    num_samples: Annotated[
        int | None,
        typer.Option(
            "--num-samples",
            help="Samples per problem, as the run was made (default: the highest sample id found + 1); "
            "a sample below it without a file is judged missing (incorrect).",
        ),
    ] = None,
    pass_at_k: Annotated[
        str, typer.Option("--pass-at-k", help="Comma-separated k values for pass@k (default: 1 and N).")
    ] = "",
    device: Device = "auto",
    json_path: Annotated[
        str | None, typer.Option("--json", help="Write every verdict here as a JSON list ('-' for stdout).")
    ] = None,
    baselines: Baselines = "eager",
    seed: Seed = None,
    correctness_only: CorrectnessOnly = False,
    kernelbench_compat: KernelbenchCompat = False,
    eval_mode: EvalMode = False,
    time_budget: Annotated[
        float, typer.Option("--time-budget", help="Seconds of timing per timed shape (cap).")
    ] = 10.0,
    shape_variants: ShapeVariants = "probe",
    policy: Policy = None,
    refuse_random_reference: RefuseRandom = False,
    fresh: Fresh = False,
    db: Db = None,
    timeout: Timeout = 600.0,
    import_timeout: ImportTimeout = 60.0,
    case_timeout: CaseTimeout = 300.0,
    timing_timeout: TimingTimeout = 600.0,
    evaluation_timeout: EvaluationTimeout = 3600.0,
    seeds_per_case: SeedsPerCase = 2,
    executor: Annotated[str, typer.Option("--executor", help="local (one worker per GPU) | ray")] = "local",
    address: Annotated[
        str | None, typer.Option("--address", help="Ray cluster address (with --executor ray).")
    ] = None,
    build_cache: BuildCacheOpt = None,
    build_workers: BuildWorkers = 0,
    per_device: Annotated[
        int, typer.Option("--per-device", help="Evaluations in flight per GPU (their timing never overlaps).")
    ] = 1,
    require_sandbox: RequireSandbox = False,
    write: Annotated[
        bool,
        typer.Option(
            "--write/--no-write", help="Write eval_results.json, pass_at_k_results.json and baseline files."
        ),
    ] = True,
    exit_zero: Annotated[
        bool, typer.Option("--exit-zero", help="Exit 0 whatever the verdicts; misuse still exits 2.")
    ] = False,
    cpu_threads: CpuThreads = 1,
    time_when_busy: TimeWhenBusy = False,
    time_interpreted: TimeInterpreted = False,
) -> None:
    """Judge a KernelBench run folder; write its eval_results.json.

    Every level_<L>_problem_<P>_sample_<S>_kernel.py in RUN_DIR is judged against problem P of the
    level in the checkout; fast_p and pass@k count every problem, as KernelBench does."""
    from kernelproof.api import db_path, find_run
    from kernelproof.api import kernelbench as judge
    from kernelproof.progress import Progress, keeping

    require_writable(json_path)
    run = find_run(run_dir, level, kernelbench, num_samples)
    ks = _ks(pass_at_k, run.num_samples)
    options = EvalOptions(
        device=device,
        baselines=tuple(baselines.split(",")),
        seed=seed,
        correctness_only=correctness_only,
        kernelbench_compat=kernelbench_compat,
        eval_mode=eval_mode,
        refuse_random_reference=refuse_random_reference,
        shape_variants=shape_variants,
        policy=policy,
        seeds_per_case=seeds_per_case,
        cpu_threads=cpu_threads,
        time_when_busy=time_when_busy,
        time_interpreted=time_interpreted,
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
    out = make_console(stderr=json_path == "-")
    judged: dict[tuple[int, int], object] = {}
    total = len(run.pairs())
    store = db_path(db)
    where = f"in the store {display_path(store)}" if store else "nowhere (--db '' stores none)"

    def kept() -> str:
        return (
            f"{len(judged)} of {total} samples judged, kept {where}; {total - len(judged)} not finished, "
            "and eval_results.json not written (a rerun is served what was kept)"
        )

    with Progress("kernelbench", total, console=out) as shown, keeping(kept):
        for sample, v in judge(run, options, executor=executor, address=address):
            judged[(sample.problem, sample.sample)] = v
            served = f" (stored verdict from {v.stored.at[:16]})" if v.stored is not None else ""
            shown.finished(
                f"{v.verdict.value:5s} {sample.path.name}{served}"
                + (f" {','.join(v.codes)}" if v.codes else "")
            )
    _report(out, run, judged, ks, correctness_only, write)
    if json_path:
        text = json.dumps([v.to_json() for v in judged.values()], indent=2, allow_nan=False) + "\n"
        if json_path == "-":
            print(text, end="")
        else:
            Path(json_path).write_text(text)
    codes = [exits.of_verdict(v) for v in judged.values()]
    raise typer.Exit(exits.EXIT_PASS if exit_zero else exits.worst(codes))


def _ks(text: str, n: int) -> tuple[int, ...]:
    if not text:
        return tuple(sorted({1, n}))
    try:
        ks = tuple(sorted({int(k) for k in text.split(",")}))
    except ValueError:
        raise typer.BadParameter(f"--pass-at-k takes comma-separated integers, not {text!r}") from None
    if not ks or ks[0] < 1:
        raise typer.BadParameter(f"--pass-at-k values must be at least 1, not {text!r}")
    return ks


def _report(out, run, judged, ks, correctness_only: bool, write: bool) -> None:
    from kernelproof.report import kernelbench as kb

    docs = {key: v.to_json() for key, v in judged.items()}
    rows = [
        (f"{run.problems[s.problem].name} #{s.sample}", judged.get((s.problem, s.sample)))
        for s in run.samples
    ]
    title = f"kernelproof kernelbench: level {run.level}, run {run.run_dir.resolve().name}"
    out.print(kernelbench_table(rows, title=title, width=out.width))
    results = kb.eval_results(run, docs)
    files = {}
    if not correctness_only:
        for name in [n for n in kb.BASELINE_FILES if n != "eager"]:
            kb.add_baseline_stats(results, docs, name)
        for name, stem in kb.BASELINE_FILES.items():
            doc = kb.baseline_times(run, results, name)
            if any(e.get("mean") is not None for e in doc[f"level{run.level}"].values()):
                files[f"{stem}.json"] = doc
    scores = kb.score(run, results, files.get("baseline_time_torch.json"), ks)
    _print_scores(out, run, scores, correctness_only)
    for name in run.strays:
        say(out, f"no problem in level {run.level} for {name}: not judged", style="dim")
    if write:
        files = {
            "eval_results.json": results,
            "pass_at_k_results.json": kb.pass_at_k_results(run, results, ks),
        } | files
        ours = _ours(run.run_dir / "eval_results.json")  # decided before any file is written
        for name, doc in files.items():
            _write(out, run.run_dir / name, doc, keep=not ours)


def _print_scores(out, run, s, correctness_only: bool) -> None:
    """The scores, each line wrapped at words to the console's width (80 in a pipe)."""
    missing = len(run.missing)
    say_wrapped(
        out,
        f"level {run.level}: {s.problems} problems, {s.with_samples} with samples, "
        f"{run.num_samples} sample(s) each" + (f" ({missing} missing: incorrect)" if missing else ""),
    )
    passk = ", ".join(f"pass@{k}={v:.3f}" for k, v in s.pass_at_k.items())
    say_wrapped(out, f"correct: {s.correct}/{s.problems} problems; {passk} (over every problem of the level)")
    if correctness_only or s.fast_p is None:
        say_wrapped(out, "fast_p: not measured (nothing was timed)")
    else:
        for label, by_p in s.fast_p.items():
            if label != "sample 0" and run.num_samples == 1:
                continue
            figures = ", ".join(f"fast_{p:g}={v:.0%}" for p, v in by_p.items())
            say_wrapped(out, f"fast_p vs eager, {label}: {figures}")
        say_wrapped(
            out,
            "  (KernelBench's rule: over every problem of the level, the reference's mean time over the"
            " sample's; sample 0 is what KernelBench's analysis reads)",
            style="dim",
        )
    if s.unjudged:
        left = s.problems - sum(s.unjudged.values())
        why = ", ".join(f"{code} {n}" for code, n in sorted(s.unjudged.items()))
        say_wrapped(
            out, f"{sum(s.unjudged.values())} problem(s) not judged on the candidate's merits ({why});"
        )
        passk = ", ".join(f"pass@{k}={v:.3f}" for k, v in s.pass_at_k_judged.items())
        say_wrapped(out, f"  without them ({left} problems): {passk}")
        for label, by_p in (s.fast_p_judged or {}).items():
            if label == "sample 0" or run.num_samples > 1:
                say_wrapped(
                    out,
                    f"  fast_p vs eager, {label}: "
                    + ", ".join(f"fast_{p:g}={v:.0%}" for p, v in by_p.items()),
                )


def _write(out, path: Path, doc: object, *, keep: bool) -> None:
    """Write ``doc`` to ``path``; with ``keep``, a file already there (KernelBench's own) is kept
    beside it first, once."""
    if keep and path.is_file():
        kept = path.with_name(path.stem + KEEP_SUFFIX)
        if not kept.exists():
            os.replace(path, kept)
            say(out, f"kept the earlier {path.name} as {kept.name}")
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(doc, indent=2, allow_nan=False) + "\n")
    os.replace(tmp, path)
    say(out, f"wrote {display_path(str(path))}")


def _ours(path: Path) -> bool:
    """Whether the eval_results.json at ``path`` is absent or was written by this verb (every entry
    carries kernelproof's metadata): then the files beside it are this verb's too."""
    if not path.exists():
        return False
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return False
    entries = [e for v in doc.values() if isinstance(v, list) for e in v] if isinstance(doc, dict) else []
    return bool(entries) and all("kernelproof" in (e.get("metadata") or {}) for e in entries)
