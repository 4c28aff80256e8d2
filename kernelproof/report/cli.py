"""Command-line verbs for reports and certificates, registered by ``kernelproof.cli``.

Thin layers over :mod:`kernelproof.report` and :mod:`kernelproof.certify` (house rule 10).
Exit codes:

    0  done (report written; certificate consistent; claim holds)
    1  the claim does not hold (verify), or the certificate's runs disagree (certify; still written)
    2  misuse: missing or unreadable input, bad option, damaged certificate
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from kernelproof.options import EvalOptions, normalize_baselines

EXIT_OK, EXIT_DOES_NOT_HOLD, EXIT_USAGE = 0, 1, 2


def _fail(message: str, code: int = EXIT_USAGE) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(code)


def report_command(
    inputs: Annotated[
        list[Path] | None, typer.Argument(help="Verdict JSON files or folders of them.")
    ] = None,
    db: Annotated[Path | None, typer.Option("--db", help="Read every verdict in this SQLite store.")] = None,
    html: Annotated[
        Path | None, typer.Option("--html", help="Write the self-contained HTML report here.")
    ] = None,
    md: Annotated[Path | None, typer.Option("--md", help="Write the Markdown report here.")] = None,
    title: Annotated[str, typer.Option("--title", help="Heading of the report.")] = "kernelproof report",
    ceilings: Annotated[
        str | None, typer.Option("--ceilings", help="Device ceilings to draw (e.g. h200); default: matched.")
    ] = None,
) -> None:
    """Write an HTML and/or Markdown report of verdicts: scores, fast_p, speedups, roofline."""
    from kernelproof.data import load_ceilings
    from kernelproof.report import ReportInputError, build_report, load_documents
    from kernelproof.report.metrics import plural

    if html is None and md is None:
        raise _fail("give --html PATH and/or --md PATH")
    if not inputs and db is None:
        raise _fail("give verdict JSON files or --db PATH")
    try:
        docs = load_documents(inputs or [], db=db)
        chosen = load_ceilings(ceilings) if ceilings else None
    except (ReportInputError, KeyError) as err:
        raise _fail(str(err)) from err
    if not docs:
        raise _fail("no verdict documents found in the inputs")
    summary = build_report(docs, html=html, md=md, title=title, ceilings=chosen)
    written = ", ".join(str(p) for p in (html, md) if p is not None)
    typer.echo(
        f"{plural(len(summary.results), 'verdict')} on {plural(len(summary.tasks), 'task')} -> {written}"
    )


def certify_command(
    task: Annotated[Path, typer.Argument(help="The task file.")],
    solution: Annotated[Path, typer.Argument(help="The solution file.")],
    out: Annotated[Path | None, typer.Option("--out", "-o", help="Certificate path.")] = None,
    runs: Annotated[int, typer.Option("--runs", help="Independent runs (at least 2).")] = 2,
    device: Annotated[str, typer.Option("--device", help="auto | cuda | cuda:N | cpu")] = "auto",
    baselines: Annotated[str, typer.Option("--baselines", help="Comma-separated baselines.")] = "eager",
    seed: Annotated[int | None, typer.Option("--seed", help="Derive the runs' seeds from this.")] = None,
    time_budget_s: Annotated[float, typer.Option("--time-budget", help="Timing budget per shape, s.")] = 20.0,
    eval_mode: Annotated[bool, typer.Option("--eval-mode", help="Run models in eval() mode.")] = False,
) -> None:
    """Evaluate a solution in independent runs and write a certificate anyone can verify."""
    from kernelproof.certify import certify, write_certificate
    from kernelproof.errors import UsageError

    if not task.is_file() or not solution.is_file():
        raise _fail(f"{task if not task.is_file() else solution}: no such file")
    try:
        options = EvalOptions(
            device=device,
            baselines=normalize_baselines(baselines.split(",")),
            seed=seed,
            time_budget_s=time_budget_s,
            eval_mode=eval_mode,
        )
        cert = certify(task, solution, options, runs=runs)
    except (UsageError, ValueError) as err:
        raise _fail(str(err)) from err
    path = write_certificate(cert, out or solution.with_suffix(".cert.json"))
    claim = cert["claim"]
    typer.echo(f"{path}: {claim['verdict']} in {runs} runs ({', '.join(claim['outcomes'])})")
    for name, band in claim["speedups"].items():
        typer.echo(
            f"  speedup vs {name}: {band['center']:.4g}x, re-runs must fall within "
            f"±{100 * band['rel_halfwidth_one_rerun']:.1f} %"
        )
    if not claim["consistent"]:
        raise _fail("the runs disagree on the verdict; the certificate records it", EXIT_DOES_NOT_HOLD)


def verify_command(
    cert: Annotated[Path, typer.Argument(help="A certificate written by `kernelproof certify`.")],
    reruns: Annotated[int, typer.Option("--reruns", help="Re-runs to average.")] = 1,
    task: Annotated[Path | None, typer.Option("--task", help="Check this task file instead.")] = None,
    solution: Annotated[Path | None, typer.Option("--solution", help="Check this solution instead.")] = None,
    fresh_seeds: Annotated[bool, typer.Option("--fresh-seeds", help="New secret seeds.")] = False,
    json_out: Annotated[Path | None, typer.Option("--json", help="Write the result document here.")] = None,
) -> None:
    """Re-run a certificate and say whether its result holds (exit 0) or not (exit 1), and why."""
    from kernelproof.certify import CertificateError, verify

    try:
        result = verify(cert, reruns=reruns, task=task, solution=solution, fresh_seeds=fresh_seeds)
    except CertificateError as err:
        raise _fail(str(err)) from err
    for check in result.checks:
        typer.echo(f"  [{'ok' if check.passed else 'FAIL'}] {check.message}")
    for note in result.notes:
        typer.echo(f"  note: {note}")
    if json_out is not None:
        json_out.write_text(json.dumps(result.to_json(), indent=1) + "\n", encoding="utf-8")
    typer.echo(
        "the result holds" if result.holds else "the result does not hold: " + "; ".join(result.reasons)
    )
    if not result.holds:
        raise typer.Exit(EXIT_DOES_NOT_HOLD)
