"""Command-line verbs for reports and certificates, registered by ``kernelproof.cli``.

Thin layers over :mod:`kernelproof.report`, :mod:`kernelproof.certify` and
:mod:`kernelproof.signing` (docs/architecture.md, house rule 10). Everything printed that a certificate, a verdict or a
path can carry goes through :func:`kernelproof.text.terminal`. Exit codes, from the one table
(kernelproof/exits.py):

    0  done (report written; certificate of passing runs that agree; claim holds; key shown)
    1  the claim does not hold, or the certificate is unsigned, altered or signed by a key not
       trusted (verify); a run was rejected, or the runs disagree (certify; still written)
    2  misuse: missing or unreadable input, bad option, damaged certificate, unusable key file;
       a task that does not load (certify)
    3  kernelproof's own failure (certify: a run ended in internal_error)

``certify`` runs several evaluations and exits with the worst code among them.
Errors go to stderr as ``error: <message>``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from kernelproof import exits
from kernelproof.commands.cli_options import Baselines, Device, EvalMode, TimeBudget, eval_options
from kernelproof.console import REASON_CHARS, make_console, print_error, say_wrapped
from kernelproof.options import normalize_baselines
from kernelproof.text import terminal

EXIT_OK, EXIT_DOES_NOT_HOLD, EXIT_USAGE = exits.EXIT_PASS, exits.EXIT_REJECTED, exits.EXIT_USAGE


def _writable(*outputs: tuple[Path | None, str]) -> None:
    """Refuse (exit 2) an output path whose folder does not exist, before anything runs: a
    report or certificate is not lost to a mistyped path at the end (a traceback, exit 3)."""
    from kernelproof.errors import UsageError
    from kernelproof.preflight import require_writable

    for path, option in outputs:
        try:
            require_writable(None if path is None else str(path), option)
        except UsageError as err:
            raise _fail(str(err)) from None


def _fail(message: str, code: int = EXIT_USAGE) -> typer.Exit:
    """Print ``error: <message>`` to stderr (the one wording) and give the exit to raise."""
    print_error(make_console(stderr=True), message)
    return typer.Exit(code)


def report_command(
    inputs: Annotated[
        list[Path] | None, typer.Argument(help="Verdict JSON files or folders of them.")
    ] = None,
    db: Annotated[
        str | None,
        typer.Option(
            "--db",
            help="Read every verdict in this results store (default without INPUTS: the store every "
            "verb uses, $KERNELPROOF_DB or ~/.local/share/kernelproof/results.sqlite).",
        ),
    ] = None,
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
    from kernelproof.report.scores import plural
    from kernelproof.store import db_path

    if html is None and md is None:
        raise _fail("give --html PATH and/or --md PATH")
    _writable((html, "--html"), (md, "--md"))
    store = db_path(db) if db is not None or not inputs else None  # the default store without inputs
    if not inputs and store is None:
        raise _fail("--db '' names no store: give verdict JSON files")
    try:
        docs = load_documents(inputs or [], db=store)
        chosen = load_ceilings(ceilings) if ceilings else None
    except (ReportInputError, KeyError) as err:
        raise _fail(str(err)) from err
    if store is not None:
        _name_unverified(store)
    if not docs:
        raise _fail("no verdict documents found in the inputs")
    summary = build_report(docs, html=html, md=md, title=title, ceilings=chosen)
    written = ", ".join(str(p) for p in (html, md) if p is not None)
    typer.echo(
        terminal(
            f"{plural(len(summary.results), 'verdict')} on {plural(len(summary.tasks), 'task')} -> {written}"
        )
    )


def _name_unverified(path: str) -> None:
    """One line on stderr per stored row the report leaves out because it does not verify (a row
    changed outside kernelproof is never reported as a result, nor dropped without a word)."""
    from kernelproof.store import NOTE_ROWS, Store, unverified_line

    bad = Store(path, readonly=True).unverified()
    err = make_console(stderr=True)
    for row in bad[:NOTE_ROWS]:
        print_error(err, f"{unverified_line(row)}; left out of the report", label="warning")
    if len(bad) > NOTE_ROWS:
        print_error(err, f"... and {len(bad) - NOTE_ROWS} more unverified rows left out", label="warning")


KeyPath = Annotated[
    Path | None,
    typer.Option(
        "--key", help="Your signing key (default: ~/.config/kernelproof/signing-key.pem; made on first use)."
    ),
]


def _say(text: str) -> None:
    typer.echo(terminal(text))


def keys_command(
    path: Annotated[
        Path | None,
        typer.Option("--path", help="The private key file (default: ~/.config/kernelproof/signing-key.pem)."),
    ] = None,
) -> None:
    """Create your certificate signing key (once) and show its public key and fingerprint."""
    from kernelproof import signing

    try:
        key, where, created = signing.load_or_create_key(path)
    except signing.KeyFileError as err:
        raise _fail(str(err)) from err
    _say(
        f"created a signing key: {where} (mode 0600: keep it to yourself)"
        if created
        else f"signing key: {where}"
    )
    _say(f"public key ({signing.public_key_path(where)}; give it to whoever verifies your certificates):")
    _say(f"  {signing.openssh_line(key.public_key())}")
    _say(f"fingerprint: {signing.fingerprint(signing.raw_public(key))}")


def certify_command(
    ctx: typer.Context,
    task: Annotated[Path, typer.Argument(help="The task file.")],
    solution: Annotated[Path, typer.Argument(help="The solution file.")],
    out: Annotated[Path | None, typer.Option("--out", "-o", help="Certificate path.")] = None,
    runs: Annotated[int, typer.Option("--runs", help="Independent runs (at least 2).")] = 2,
    device: Device = "auto",
    baselines: Baselines = "eager",
    seed: Annotated[int | None, typer.Option("--seed", help="Derive the runs' seeds from this.")] = None,
    time_budget: TimeBudget = 20.0,
    eval_mode: EvalMode = False,
    key: KeyPath = None,
) -> None:
    """Evaluate a solution in independent runs and write a signed certificate anyone can verify."""
    from kernelproof import signing
    from kernelproof.api import certify
    from kernelproof.certify import CertificateError, write_certificate
    from kernelproof.errors import UsageError

    _writable((out, "--out"))
    for path, what in ((task, "task"), (solution, "solution")):
        if path.is_dir():
            raise _fail(f"the {what} {path} is a directory, not a file")
        if not path.is_file():
            raise _fail(f"{what} file not found: {path}")
    try:
        private, where, created = signing.load_or_create_key(key)
    except signing.KeyFileError as err:
        raise _fail(str(err)) from err
    if created:
        public = signing.public_key_path(where)
        _say(f"created a signing key: {where} (mode 0600); others trust your certificates through {public}")
    try:
        options = eval_options(ctx.params)
        options = options.replace(baselines=normalize_baselines(options.baselines))
        cert = certify(task, solution, options, runs=runs)
    except (UsageError, ValueError) as err:
        raise _fail(str(err)) from err
    claim = cert["claim"]
    codes = [exits.of_document(run["verdict"]) for run in cert["runs"]]
    try:
        path = write_certificate(cert, out or solution.with_suffix(".cert.json"), private)
    except CertificateError as err:
        _say_failed_runs(cert, codes)
        say_wrapped(make_console(), str(err), limit=REASON_CHARS)
        raise typer.Exit(exits.worst(codes)) from None
    _say(f"{path}: {claim['verdict']} in {runs} runs ({', '.join(claim['outcomes'])})")
    for name, band in claim["speedups"].items():
        _say(
            f"  speedup vs {name}: {band['center']:.4g}x, re-runs must fall within "
            f"±{100 * band['rel_halfwidth_one_rerun']:.1f} %"
        )
    _say(f"  signed by {signing.fingerprint(signing.raw_public(private))}")
    _say_failed_runs(cert, codes)
    if not claim["consistent"]:
        _say("the runs disagree on the verdict; the certificate records it")
        codes.append(EXIT_DOES_NOT_HOLD)
    raise typer.Exit(exits.worst(codes))


def _say_failed_runs(cert: dict, codes: list[int]) -> None:
    """Each run that did not pass, with its reasons."""
    for run, code in zip(cert["runs"], codes):
        if code != exits.EXIT_PASS:
            reasons = run["verdict"].get("reasons") or []
            why = "; ".join(f"{r.get('code')}: {r.get('message')}" for r in reasons) or run["verdict"].get(
                "verdict"
            )
            say_wrapped(make_console(), f"  run with seed {run['seed']}: {why}", limit=REASON_CHARS)


def verify_command(
    cert: Annotated[Path, typer.Argument(help="A certificate written by `kernelproof certify`.")],
    reruns: Annotated[int, typer.Option("--reruns", help="Re-runs to average.")] = 1,
    task: Annotated[Path | None, typer.Option("--task", help="Check this task file instead.")] = None,
    solution: Annotated[Path | None, typer.Option("--solution", help="Check this solution instead.")] = None,
    fresh_seeds: Annotated[bool, typer.Option("--fresh-seeds", help="New secret seeds.")] = False,
    trust: Annotated[
        list[Path] | None,
        typer.Option("--trust", help="A public key file whose signatures you trust (repeatable)."),
    ] = None,
    unsigned: Annotated[
        bool,
        typer.Option("--unsigned", help="Check the claim although no trusted signature holds (said so)."),
    ] = False,
    key: KeyPath = None,
    json_out: Annotated[Path | None, typer.Option("--json", help="Write the result document here.")] = None,
) -> None:
    """Check a certificate's signature and claim, re-run it, and say whether it holds (exit 0) or not (1)."""
    from kernelproof import signing
    from kernelproof.api import verify
    from kernelproof.certify import CertificateError, VerifyOptions

    _writable((json_out, "--json"))
    try:
        options = VerifyOptions(
            reruns=reruns,
            task=task,
            solution=solution,
            fresh_seeds=fresh_seeds,
            trusted=_trusted(key, trust or []),
            allow_unsigned=unsigned,
        )
        result = verify(cert, options)
    except (CertificateError, signing.KeyFileError) as err:
        raise _fail(str(err)) from err
    for check in result.checks:
        _say(f"  [{'ok' if check.passed else 'FAIL'}] {check.message}")
    for note in result.notes:
        _say(f"  note: {note}")
    if json_out is not None:
        json_out.write_text(json.dumps(result.to_json(), indent=1) + "\n", encoding="utf-8")
    if result.unsigned_allowed:
        _say("--unsigned: no trusted signature was required; nothing here shows who made this certificate")
    _say("the result holds" if result.holds else "the result does not hold: " + "; ".join(result.reasons))
    if not result.holds:
        raise typer.Exit(EXIT_DOES_NOT_HOLD)


def _trusted(key: Path | None, files: list[Path]) -> dict[bytes, str]:
    """The reader's trusted public keys: their own (when they have one) and every --trust file."""
    from kernelproof import signing

    trusted: dict[bytes, str] = {}
    own = key or signing.default_key_path()
    if own.exists():
        trusted[signing.raw_public(signing.load_private_key(own))] = "your key"
    for path in files:
        trusted.setdefault(signing.load_public_key(path), f"trusted through {path}")
    return trusted
