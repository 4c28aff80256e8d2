"""``kernelproof kernelbench RUN_DIR``: judge a KernelBench run folder as it is, registered by
``kernelproof.cli``.

A thin layer over :func:`kernelproof.api.kernelbench` (docs/architecture.md, house rule 10): it finds the samples, decides
first what this machine cannot judge (kernelproof/report/feasibility.py: a CUDA sample without CUDA,
a problem too large for the device) and prints it at once, runs the rest as ``bench`` does (in
parallel over the GPUs, served from the store when judged before), judges again what a busy machine
could not time, prints the table and KernelBench's scores, and writes KernelBench's own files into
RUN_DIR (kernelproof/report/kernelbench_run.py says which and in what shape; docs/kernelbench.md shows
the commands). Exit codes, from the one table (kernelproof/exits.py): 1 when any sample was
rejected, whatever else happened (an error of the machine or of kernelproof never hides a
rejection, and is reported on its own lines); else the worst over the samples; 2 for misuse; 0 with
``--exit-zero``.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Annotated

import typer

from kernelproof import exits
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
from kernelproof.console import display_path, kernelbench_table, make_console, say, say_wrapped
from kernelproof.preflight import require_writable

KEEP_SUFFIX = ".before-kernelproof.json"  # where a results file kernelproof did not write is kept
QUIET_WAIT_S = 60.0  # how long a busy machine is waited for before its untimed samples are judged again
# KernelBench's --backend values (scripts/generate_samples.py) and what kernelproof makes of each.
JUDGED_BACKENDS = ("cuda", "triton")
KERNELBENCH_BACKENDS = ("cuda", "triton", "cute", "tilelang", "thunderkittens")
# KernelBench's --timing_method values (src/kernelbench/timing.py); kernelproof's clock is its own.
KERNELBENCH_TIMING = ("cuda_event", "do_bench", "do_bench_impl", "host_time", "nsight_python_time")
# What to do about each outcome that left a sample unjudged on its merits.
REMEDY = {
    "environment": "judge it on a machine with a CUDA GPU and toolkit (--device cuda)",
    "too_large": "judge it on a device with more memory, or at reduced sizes (--sizes small)",
    "machine_busy": "run it again on a quiet machine, or time it anyway with --time-when-busy (flagged)",
    "task_error": "the problem file itself does not load or run: check the checkout",
    "degenerate_task": "the problem cannot tell a right answer from a wrong one (docs/verdict.md)",
    "internal_error": "kernelproof failed on it: please report it (the verdict's reason has the details)",
}


# The verb's own options (the shared ones: commands/options.py), in the order --help lists them.
RunDir = Annotated[
    Path, typer.Argument(help="KernelBench run folder: level_<L>_problem_<P>_sample_<S>_kernel.py files.")
]
Kernelbench = Annotated[
    Path,
    typer.Option(
        "--kernelbench",
        help="Root of a KernelBench checkout (it holds KernelBench/level1) or a folder prepared by "
        "benchmarks/kernelbench_sweep.py --prepare (it holds level1).",
    ),
]
Level = Annotated[
    int | None,
    typer.Option(
        "--level",
        help="KernelBench level of the run (default: generation_config.yaml's, else the one level "
        "the sample files name).",
    ),
]
Problems = Annotated[
    str, typer.Option("--problems", help="Only these problem ids: 1,19 or ranges such as 3-7.")
]
Sizes = Annotated[
    str,
    typer.Option(
        "--sizes",
        help="published (default) | small (the problems' large size constants divided by 16) | a "
        "factor N: a smoke run, every verdict labelled with its sizes.",
    ),
]
Backend = Annotated[
    str | None,
    typer.Option(
        "--backend",
        help="KernelBench's backend of the run: cuda | triton (default: generation_config.yaml's). "
        "kernelproof reads each sample's own from its source.",
    ),
]
TimingMethod = Annotated[
    str | None,
    typer.Option(
        "--timing-method",
        "--timing_method",
        help="KernelBench's timing method: cuda_event only (kernelproof's own clock, docs/timing.md).",
    ),
]
NumSamples = Annotated[
    int | None,
    typer.Option(
        "--num-samples",
        help="Samples per problem, as the run was made (default: generation_config.yaml's "
        "num_samples, else the highest sample id found + 1); a sample below it without a file is "
        "judged missing (incorrect).",
    ),
]
PassAtK = Annotated[
    str, typer.Option("--pass-at-k", help="Comma-separated k values for pass@k (default: 1 and N).")
]
Write = Annotated[
    bool,
    typer.Option(
        "--write/--no-write", help="Write eval_results.json, pass_at_k_results.json and baseline files."
    ),
]


def kernelbench_command(
    ctx: typer.Context,
    run_dir: RunDir,
    kernelbench: Kernelbench,
    level: Level = None,
    problems: Problems = "",
    sizes: Sizes = "published",
    backend: Backend = None,
    timing_method: TimingMethod = None,
    num_samples: NumSamples = None,
    pass_at_k: PassAtK = "",
    device: Device = "auto",
    json_path: VerdictsJson = None,
    baselines: Baselines = "eager",
    seed: Seed = None,
    correctness_only: CorrectnessOnly = False,
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
    executor: Executor = "local",
    address: Address = None,
    build_cache: BuildCacheOpt = None,
    build_workers: BuildWorkers = 0,
    per_device: PerDevice = 1,
    require_sandbox: RequireSandbox = False,
    write: Write = True,
    exit_zero: ExitZero = False,
    cpu_threads: CpuThreads = 1,
    time_when_busy: TimeWhenBusy = False,
    time_interpreted: TimeInterpreted = False,
) -> None:
    """Judge a KernelBench run folder; write its eval_results.json.

    Every level_<L>_problem_<P>_sample_<S>_kernel.py in RUN_DIR is judged against problem P of the
    level in the checkout; fast_p and pass@k count every problem, as KernelBench does."""
    require_writable(json_path)
    run = _the_run(run_dir, kernelbench, level, num_samples, problems, sizes)
    _check_timing_method(timing_method or run.config.get("timing_method"))
    asked_backend = _check_backend(backend or run.config.get("backend"))
    ks = _ks(pass_at_k, run.num_samples)
    options = eval_options(ctx.params)
    out = make_console(stderr=json_path == "-")
    say_wrapped(
        out,
        f"level {run.level}: {len(run.pairs())} sample file(s) of "
        f"{len({s.problem for s in run.samples})} problem(s)"
        + ("" if run.sizes == "published" else f", at reduced sizes ({_sizes_said(run.sizes)})"),
    )
    if asked_backend:
        _say_backends(out, run, asked_backend)
    judged, notes = _judge_run(run, options, out, executor=executor, address=address)
    _report(out, run, judged, ks, correctness_only, write, notes)
    _write_verdicts(json_path, judged)
    raise typer.Exit(exits.EXIT_PASS if exit_zero else exit_code(judged.values()))


def _the_run(run_dir: Path, kernelbench: Path, level, num_samples, problems: str, sizes: str):
    """The run folder's samples and the checkout's problems they answer, at the sizes asked."""
    from kernelproof.api import find_run
    from kernelproof.report.kernelbench_run import parse_problems
    from kernelproof.report.scaled_tasks import parse_sizes

    chosen = parse_problems(problems) if problems else None
    factor = parse_sizes(sizes)
    return _scaled(find_run(run_dir, level, kernelbench, num_samples, chosen), factor)


def _judge_run(run, options, out, *, executor: str, address: str | None):
    """Every sample judged, in three steps: what this machine cannot judge, decided at once (local
    executor); the rest, as ``bench`` judges; what a busy machine could not time, judged again.
    Returns the verdicts by (problem, sample) and the notes eval_results.json keeps of how a sample
    was judged. Ctrl-C says how many were kept."""
    from kernelproof.api import db_path
    from kernelproof.cli_progress import Progress, keeping

    judged: dict[tuple[int, int], object] = {}
    notes: dict[tuple[int, int], str] = {}  # what eval_results.json says of how a sample was judged
    total = len(run.pairs())
    store = db_path(options.db)
    where = f"in the store {display_path(store)}" if store else "nowhere (--db '' stores none)"

    def kept() -> str:
        return (
            f"{len(judged)} of {total} samples judged, kept {where}; {total - len(judged)} not finished, "
            "and eval_results.json not written (a rerun is served what was kept)"
        )

    with Progress("kernelbench", total, console=out) as shown, keeping(kept):

        def show(sample, v, again: str = "") -> None:
            """A sample's verdict: a finished item the first time, a line of its own when judged again."""
            judged[(sample.problem, sample.sample)] = v
            served = f" (stored verdict from {v.stored.at[:16]})" if v.stored is not None else ""
            text = (
                f"{v.verdict.value:5s} {sample.path.name}{served}"
                + (f" {','.join(v.codes)}" if v.codes else "")
                + (f" ({again})" if again else "")
            )
            if again:
                shown.note(f"again: {text}")
            else:
                shown.finished(text)

        if executor == "local":
            for sample, v in _infeasible(run, options.device, shown):
                show(sample, v)
            if judged:
                left = total - len(judged)
                shown.note(
                    f"{len(judged)} sample(s) cannot be judged on this machine ({_counts(judged)}), "
                    f"decided before any evaluation; judging the other {left}",
                    style="dim",
                )
        rest = dataclasses.replace(
            run, samples=tuple(s for s in run.samples if (s.problem, s.sample) not in judged)
        )
        if rest.pairs():
            for sample, v in _judge(rest, options, executor=executor, address=address):
                show(sample, v)
        busy = [s for s in run.samples if _busy(judged.get((s.problem, s.sample)))]
        if busy and not options.correctness_only:
            _judge_busy_again(run, busy, options, executor, address, shown, show, notes, judged)
    return judged, notes


def _write_verdicts(json_path: str | None, judged) -> None:
    """--json: every verdict as a JSON list ('-': stdout)."""
    if json_path:
        text = json.dumps([v.to_json() for v in judged.values()], indent=2, allow_nan=False) + "\n"
        if json_path == "-":
            print(text, end="")
        else:
            Path(json_path).write_text(text)


def _judge(run, options, **kwargs):
    """The api's kernelbench (docs/architecture.md, house rule 10), looked up at each call."""
    from kernelproof.api import kernelbench

    return kernelbench(run, options, **kwargs)


def exit_code(verdicts) -> int:
    """1 when any sample was rejected, whatever else happened: an error of the machine (too_large,
    environment, machine_busy) or of kernelproof (internal_error) says nothing of the candidates
    and never hides a rejection (it has lines of its own); else the worst over the samples."""
    codes = [exits.of_verdict(v) for v in verdicts]
    return exits.EXIT_REJECTED if exits.EXIT_REJECTED in codes else exits.worst(codes)


def _busy(v) -> bool:
    return v is not None and "machine_busy" in v.codes


def _counts(judged) -> str:
    counts: dict[str, int] = {}
    for v in judged.values():
        code = v.codes[0] if v.codes else v.verdict.value
        counts[code] = counts.get(code, 0) + 1
    return ", ".join(f"{code} {n}" for code, n in sorted(counts.items()))


def _scaled(run, factor: int):
    """The run with its problems replaced by copies at reduced sizes (kernelproof/report/scaled_tasks.py)."""
    from kernelproof.report.scaled_tasks import scaled_copy, sizes_label

    if factor <= 1:
        return run
    problems = {
        pid: dataclasses.replace(p, path=scaled_copy(p.path, factor, run.run_dir, run.level))
        for pid, p in run.problems.items()
    }
    return dataclasses.replace(run, problems=problems, sizes=sizes_label(factor))


def _sizes_said(label: str) -> str:
    return f"the problems' large size constants scaled by {label}: a smoke run, not KernelBench's score"


def _check_backend(backend: str | None) -> str | None:
    """KernelBench's ``--backend``: cuda and triton are what kernelproof judges; the others are
    refused with a sentence (it cannot build or run them)."""
    if backend is None:
        return None
    name = backend.strip().lower()
    if name in JUDGED_BACKENDS:
        return name
    if name in KERNELBENCH_BACKENDS:
        raise typer.BadParameter(
            f"kernelproof judges CUDA (load_inline) and Triton kernels; it cannot build or run {name} "
            "kernels, so a run of that backend cannot be judged here",
            param_hint="--backend",
        )
    raise typer.BadParameter(
        f"KernelBench's backends are {', '.join(KERNELBENCH_BACKENDS)}, not {backend!r}",
        param_hint="--backend",
    )


def _check_timing_method(method: str | None) -> None:
    """KernelBench's ``--timing_method``: kernelproof times with its own clock (docs/timing.md), on a
    GPU from device-side spans like cuda_event's; the others are refused with a sentence."""
    if method is None or method.strip().lower() == "cuda_event":
        return
    if method.strip().lower() in KERNELBENCH_TIMING:
        raise typer.BadParameter(
            f"kernelproof times with its own clock (device-side spans on a GPU, interleaved with the "
            f"reference, docs/timing.md) and cannot time as {method} does; leave --timing-method out "
            "or give cuda_event",
            param_hint="--timing-method",
        )
    raise typer.BadParameter(
        f"KernelBench's timing methods are {', '.join(KERNELBENCH_TIMING)}, not {method!r}",
        param_hint="--timing-method",
    )


def _say_backends(out, run, backend: str) -> None:
    """Name the samples whose source holds no kernel of the run's backend (judged all the same)."""
    from kernelproof.report.kernelbench_run import sample_backends

    found = {b: n for b, n in sample_backends(run).items() if b != backend}
    if found:
        what = ", ".join(f"{n} {'plain PyTorch' if b == 'torch' else b}" for b, n in sorted(found.items()))
        say_wrapped(
            out,
            f"backend {backend}: {sum(found.values())} sample(s) hold no {backend} kernel ({what}); "
            "each is judged by what its source holds",
            style="dim",
        )


def _infeasible(run, device: str, shown):
    """(sample, error verdict) of each sample this machine cannot judge, as soon as it is known."""
    from kernelproof.api import kernelbench_infeasible

    yield from kernelbench_infeasible(run, device, lambda task: shown.state(f"sizing {task.name} on meta"))
    shown.state("")


def _judge_busy_again(run, busy, options, executor, address, shown, show, notes, judged) -> None:
    """The samples a busy machine could not time, judged again: timed, one at a time, if the
    machine is quiet within QUIET_WAIT_S; those it still could not time (or all of them, when it
    stayed busy) on correctness alone, so that a correct sample is never counted incorrect for the
    machine's load. Bounded: at most two more evaluations each."""
    from kernelproof.report.feasibility import quiet_within

    quiet = quiet_within(QUIET_WAIT_S)
    still = list(busy)
    if quiet:
        shown.note(
            f"{len(busy)} sample(s) could not be timed: the machine was busy; judging them again one at "
            "a time, now that it is quieter",
            style="dim",
        )
        again = dataclasses.replace(run, samples=tuple(busy))
        for sample, v in _judge(
            again, dataclasses.replace(options, per_device=1), executor=executor, address=address
        ):
            show(sample, v, "judged again")
        still = [s for s in busy if _busy(judged.get((s.problem, s.sample)))]
        if not still:
            return
    shown.note(
        f"{len(still)} sample(s) could not be timed: the machine "
        + ("was busy again" if quiet else f"stayed busy for {QUIET_WAIT_S:.0f} s")
        + "; judging their correctness alone (KernelBench's runtime: -1.0, not measured)",
        style="dim",
    )
    alone = dataclasses.replace(options, correctness_only=True, per_device=1)
    for sample, v in _judge(
        dataclasses.replace(run, samples=tuple(still)), alone, executor=executor, address=address
    ):
        notes[(sample.problem, sample.sample)] = (
            "correctness judged alone: the machine was too busy to time this sample"
        )
        show(sample, v, "correctness alone: the machine was too busy to time it")


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


def _report(out, run, judged, ks, correctness_only: bool, write: bool, notes=None) -> None:
    from kernelproof.report import kernelbench_run as kb

    docs = {key: v.to_json() for key, v in judged.items()}
    rows = [
        (f"{run.problems[s.problem].name} #{s.sample}", judged.get((s.problem, s.sample)))
        for s in run.samples
    ]
    title = f"kernelproof kernelbench: level {run.level}, run {run.run_dir.resolve().name}"
    if run.sizes != kb.PUBLISHED:
        title += f", sizes {run.sizes}"
    out.print(kernelbench_table(rows, title=title, width=out.width))
    results = kb.eval_results(run, docs)
    for (pid, sid), note in (notes or {}).items():
        entry = next(e for e in results[str(pid)] if e["sample_id"] == sid)
        entry["metadata"]["kernelproof"]["note"] = note
    files = {}
    if not correctness_only:
        for name in [n for n in kb.BASELINE_FILES if n != "eager"]:
            kb.add_baseline_stats(results, docs, name)
        for name, stem in kb.BASELINE_FILES.items():
            doc = kb.baseline_times(run, results, name)
            if any(e.get("mean") for e in doc[f"level{run.level}"].values()):
                files[f"{stem}.json"] = doc
    scores = kb.score(run, results, files.get("baseline_time_torch.json"), ks)
    _print_scores(out, run, scores, correctness_only)
    _print_unjudged(out, judged)
    if run.sizes != kb.PUBLISHED:
        say_wrapped(out, f"sizes {run.sizes}: {_sizes_said(run.sizes)}", style="yellow")
    for name in run.strays:
        say(out, f"no problem in level {run.level} for {name}: not judged", style="dim")
    if write:
        files = {
            "eval_results.json": results,
            "pass_at_k_results.json": kb.pass_at_k_results(run, results, ks),
        } | files
        ours = _ours(run.run_dir / "eval_results.json")  # decided before any file is written
        other_sizes = _sizes_of(run.run_dir / "eval_results.json") if ours else None
        if other_sizes is not None and other_sizes != run.sizes:  # every file of that run, written now or not
            for name in ["eval_results.json", "pass_at_k_results.json"] + [
                f"{stem}.json" for stem in kb.BASELINE_FILES.values()
            ]:
                _keep_sizes(out, run.run_dir / name, other_sizes)
        for name, doc in files.items():
            _write(out, run.run_dir / name, doc, keep=not ours)


def _print_unjudged(out, judged) -> None:
    """The samples no verdict was reached on, by cause, each with what to do: apart from the
    rejections, which they never hide (the exit code is 1 when any sample was rejected)."""
    by: dict[str, int] = {}
    for v in judged.values():
        if v.verdict.value == "error":
            code = next((c for c in v.codes if c in REMEDY), v.codes[0] if v.codes else "error")
            by[code] = by.get(code, 0) + 1
    if not by:
        return
    say_wrapped(
        out,
        f"{sum(by.values())} sample(s) reached no verdict on their merits (the machine's or "
        "kernelproof's errors, apart from any rejection); what to do:",
    )
    for code, n in sorted(by.items()):
        say_wrapped(out, f"  {code} {n}: {REMEDY.get(code, 'see the verdict reasons (--json)')}", style="dim")


def _sizes_of(path: Path) -> str | None:
    """The sizes label of the eval_results.json kernelproof wrote at ``path`` (None: unreadable)."""
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    labels = {
        (e.get("metadata") or {}).get("kernelproof", {}).get("sizes", "published")
        for v in doc.values()
        if isinstance(v, list)
        for e in v
    }
    return labels.pop() if len(labels) == 1 else None


def _keep_sizes(out, path: Path, sizes: str) -> None:
    """Keep a file written at other sizes beside, named by them: results at reduced sizes and at
    the published ones are never mixed in one file, nor lost to each other."""
    if path.is_file():
        kept = path.with_name(f"{path.stem}.sizes-{sizes.replace('/', 'of')}.json")
        os.replace(path, kept)
        say(out, f"kept the {path.name} judged at sizes {sizes} as {kept.name}")


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
