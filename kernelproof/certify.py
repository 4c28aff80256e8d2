"""Certificates: a claim about one (task, solution) pair that anyone can re-run and check.

``certify`` evaluates the pair in at least two independent runs (fresh evaluations, separate
seeds, raw samples kept) and writes one JSON document with the environment, the sha256 of
kernelproof's source tree, of the task and of the solution (their text embedded), the seeds,
the settings that decide a verdict, every run's full verdict, and the claim: the verdict the runs
agree on and, per baseline, the speedup and its equivalence band (kernelproof/band.py). The
command line signs it (kernelproof/signing.py).

``verify`` believes nothing in the document it has not re-derived: the signature must hold, by a
key the reader trusts (or ``allow_unsigned`` says so); the claim must be what the recorded runs
give; the bands come from those runs and kernelproof's own calibration constants, never from the
band fields written in the claim; the embedded task and solution are re-run through the normal
evaluation API, in its sandbox, with no store and a build cache of their own, whatever paths,
stores or caches the certificate names. docs/certificates.md states what that proves.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import secrets
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from kernelproof import signing
from kernelproof._version import __version__
from kernelproof.band import band_halfwidth_log, derive_claim, positive, same_center
from kernelproof.certificate import (
    CERT_SCHEMA,
    CertificateError,
    check_structure,
    embed_file,
    embedded_bytes,
    embedded_name,
    finite_json,
    host_environment,
    read_certificate,
    rerun_options,
    sha256_file,
    write_certificate,
)
from kernelproof.code_identity import source_tree_sha256
from kernelproof.options import EvalOptions
from kernelproof.verdict import Verdict

__all__ = [
    "CERT_SCHEMA",
    "CertificateError",
    "Check",
    "VerifyOptions",
    "VerifyResult",
    "certify",
    "finite_json",
    "read_certificate",
    "verify",
    "write_certificate",
]

VERIFY_SCHEMA = "kernelproof.verify/1"

Evaluator = Callable[[Any, Any, EvalOptions], Verdict]


def certify(
    task: str | Path,
    solution: str | Path,
    options: EvalOptions | None = None,
    runs: int = 2,
    *,
    evaluate: Evaluator,
) -> dict[str, Any]:
    """Evaluate ``runs`` times independently and return the (unsigned) certificate document.

    Each run is a fresh evaluation (``fresh=True``: nothing served from a store) with its own
    seed and ``keep_samples=True``. ``evaluate`` is :func:`kernelproof.api.evaluate` (the api and the command pass it: this module sits below the api).
    :func:`write_certificate` signs it with the key it is given.
    """
    if runs < 2:
        raise CertificateError("a certificate needs at least two independent runs to calibrate its band")
    base = (options or EvalOptions()).replace(fresh=True, keep_samples=True)
    task_p, sol_p = Path(task), Path(solution)
    records = []
    for i in range(runs):
        seed = _run_seed(base.seed, i)
        records.append(_timed_run(evaluate, task_p, sol_p, base.replace(seed=seed)))
    return finite_json(
        {
            "schema": CERT_SCHEMA,
            "created_at": _now(),
            "kernelproof": {"version": __version__, "source_sha256": source_tree_sha256()},
            "environment": host_environment(),
            "task": embed_file(task_p),
            "solution": embed_file(sol_p),
            "settings": {k: v for k, v in base.cache_key_fields().items() if k != "seed"},
            "seeds": [r["seed"] for r in records],
            "runs": records,
            "claim": derive_claim([r["verdict"] for r in records]),
        }
    )


# ---------------------------------------------------------------------------------------------
# Verification


@dataclass(frozen=True)
class Check:
    name: str  # "signature", "claim", "verdict", "speedup:eager", "task_hash", ...
    passed: bool  # whether this part of the claim holds
    message: str  # one sentence a person can act on
    certified: float | str | None = None  # what the certificate claims
    observed: float | str | None = None  # what the re-run (or the recorded runs) found
    band_rel: float | None = None  # relative half-width allowed (speedups only)


@dataclass(frozen=True)
class VerifyOptions:
    reruns: int = 1  # re-runs whose mean log speedup is compared with the band
    task: str | Path | None = None  # a task file to check in place of the embedded text
    solution: str | Path | None = None  # a solution file to check in place of the embedded text
    fresh_seeds: bool = False  # new secret seeds instead of the recorded ones
    # raw Ed25519 public keys the reader trusts -> what names each ("your key", a --trust file)
    trusted: Mapping[bytes, str] = field(default_factory=dict)
    allow_unsigned: bool = False  # check the claim without a signature that holds by a trusted key
    timeout_s: float = EvalOptions.timeout_s  # the verifier's limit on one worker step


@dataclass(frozen=True)
class VerifyResult:
    holds: bool  # every check passed
    checks: tuple[Check, ...]  # in the order they were made
    notes: tuple[str, ...] = ()  # differences that do not decide (kernelproof version, device)
    verdicts: tuple[dict[str, Any], ...] = ()  # the re-runs' verdict documents
    signature: signing.SignatureCheck | None = None  # who signed, and whether it holds
    unsigned_allowed: bool = False  # --unsigned: the signature did not decide
    schema: str = VERIFY_SCHEMA

    @property
    def reasons(self) -> list[str]:
        """Why the result does not hold (empty when it does)."""
        return [c.message for c in self.checks if not c.passed]

    def to_json(self) -> dict[str, Any]:
        return finite_json(dataclasses.asdict(self))


def verify(
    cert: str | Path | dict[str, Any],
    options: VerifyOptions | None = None,
    *,
    evaluate: Evaluator,
) -> VerifyResult:
    """Check a certificate's signature and claim, then re-run it; say whether the result holds.

    Nothing is run unless the signature holds by a trusted key (or ``allow_unsigned``) and the
    claim is what the recorded runs give. The re-runs use the certificate's verdict-deciding
    settings and its recorded seeds (the same cases), or new secret seeds with ``fresh_seeds``.
    """
    opts = options or VerifyOptions()
    doc = cert if isinstance(cert, dict) else read_certificate(cert)
    check_structure(doc)
    if opts.reruns < 1:
        raise CertificateError("verify needs at least one re-run")
    sig = signing.check(doc, dict(opts.trusted))
    checks = [_signature_check(sig, opts.allow_unsigned)]
    derived = derive_claim([r["verdict"] for r in doc["runs"]])
    if checks[-1].passed:
        checks.append(_claim_check(doc["claim"], derived, len(doc["runs"])))
    if not all(c.passed for c in checks):
        return _result(checks, (), doc, sig, opts)
    with tempfile.TemporaryDirectory(prefix="kernelproof-verify-") as tmp:
        paths = {}
        for role, given in (("task", opts.task), ("solution", opts.solution)):
            paths[role], check = _resolve(doc[role], given, Path(tmp) / role, role)
            checks.append(check)
        if not all(c.passed for c in checks):
            return _result(checks, (), doc, sig, opts)
        rerun = rerun_options(doc["settings"], Path(tmp) / "builds", opts.timeout_s)
        seeds = [r["seed"] for r in doc["runs"]]
        docs = []
        for i in range(opts.reruns):
            seed = _run_seed(None, i) if opts.fresh_seeds else seeds[i % len(seeds)]
            run = _timed_run(evaluate, paths["task"], paths["solution"], rerun.replace(seed=seed))
            docs.append(run["verdict"])
    checks += _compare(derived, docs)
    return _result(checks, tuple(docs), doc, sig, opts, derived)


def _result(
    checks: list[Check],
    docs: tuple[dict[str, Any], ...],
    doc: dict[str, Any],
    sig: signing.SignatureCheck,
    opts: VerifyOptions,
    derived: dict[str, Any] | None = None,
) -> VerifyResult:
    """The result of the checks made so far, with the notes the certificate and re-runs call for."""
    notes = _notes(doc) + (_device_notes(doc, list(docs)) if docs else ())
    notes += _band_notes(doc["claim"], derived) if derived else ()
    return VerifyResult(all(c.passed for c in checks), tuple(checks), notes, docs, sig, opts.allow_unsigned)


def _signature_check(sig: signing.SignatureCheck, allow_unsigned: bool) -> Check:
    if sig.state == "valid" and sig.trusted:
        return Check(
            "signature", True, f"signed by {sig.fingerprint} ({sig.trusted_as}); the signature holds"
        )
    if sig.state == "valid":
        problem = (
            f"signed by {sig.fingerprint}, a key you do not trust (trust it with --trust PUBKEY_FILE "
            "once you know whose it is)"
        )
    elif sig.state == "invalid":
        by = f" by {sig.fingerprint}" if sig.fingerprint else ""
        problem = f"the signature{by} does not hold: the certificate was changed after it was signed"
    else:
        problem = "the certificate is not signed: nothing shows who made it or that it is unchanged"
    if allow_unsigned:
        return Check("signature", True, f"{problem}; checked anyway (--unsigned), its origin unproven")
    return Check("signature", False, problem)


def _claim_check(claim: dict[str, Any], derived: dict[str, Any], n: int) -> Check:
    """Whether the written claim is what the recorded runs give (the band fields are not read)."""
    if claim.get("verdict") != derived["verdict"]:
        msg = (
            f"the certificate claims {claim.get('verdict')}; its {n} recorded runs give "
            f"{derived['verdict']} ({', '.join(derived['outcomes'])})"
        )
        return Check("claim", False, msg, str(claim.get("verdict")), derived["verdict"])
    claimed = claim.get("speedups") if isinstance(claim.get("speedups"), dict) else {}
    for name, band in claimed.items():
        center = band.get("center") if isinstance(band, dict) else None
        got = derived["speedups"].get(name)
        if got is None:
            msg = f"the certificate claims a speedup against {name}; its {n} recorded runs have none"
            return Check("claim", False, msg, str(center), None)
        if not same_center(center, got["center"]):
            msg = (
                f"the certificate claims {_x(center)} against {name}; its {n} recorded runs give "
                f"{got['center']:.4g}x"
            )
            return Check("claim", False, msg, center if positive(center) else str(center), got["center"])
    if not derived["consistent"]:
        msg = f"the certificate's own runs disagree ({', '.join(derived['outcomes'])}): nothing stable to verify"
        return Check("claim", False, msg, "inconsistent", "inconsistent")
    speedups = "".join(f", {b['center']:.4g}x against {k}" for k, b in derived["speedups"].items())
    msg = f"the claim ({derived['verdict']}{speedups}) is what its {n} recorded runs give"
    return Check("claim", True, msg, derived["verdict"], derived["verdict"])


def _compare(derived: dict[str, Any], docs: list[dict[str, Any]]) -> list[Check]:
    outcomes = [str(d.get("verdict")) for d in docs]
    same = all(o == derived["verdict"] for o in outcomes)
    seen = ", ".join(outcomes)
    msg = (
        f"verdict {derived['verdict']} reproduced"
        if same
        else f"the certificate says {derived['verdict']}, the re-run says {seen}"
        + _codes_text([r for d in docs for r in d.get("reasons", [])])
    )
    checks = [Check("verdict", same, msg, derived["verdict"], seen)]
    if not same:
        return checks
    for name, band in derived["speedups"].items():
        checks.append(_compare_speedup(name, band, docs))
    return checks


def _compare_speedup(name: str, band: dict[str, Any], docs: list[dict[str, Any]]) -> Check:
    medians = [(d.get("speedup") or {}).get(name, {}).get("median") for d in docs]
    if any(not positive(m) for m in medians):
        return Check(f"speedup:{name}", False, f"the re-run has no speedup against {name}", band["center"])
    observed = math.exp(sum(math.log(m) for m in medians) / len(medians))
    half = band_halfwidth_log(band, len(medians))
    rel = math.expm1(half)
    lo, hi = band["center"] * math.exp(-half), band["center"] * math.exp(half)
    inside = abs(math.log(observed) - math.log(band["center"])) <= half
    where = "inside" if inside else "outside"
    msg = (
        f"speedup against {name}: certified {band['center']:.4g}x, re-run {observed:.4g}x, "
        f"{where} the band [{lo:.4g}, {hi:.4g}] (±{100 * rel:.1f} %) derived from "
        f"{band['runs']} recorded runs"
    )
    return Check(f"speedup:{name}", inside, msg, band["center"], observed, rel)


def _codes_text(reasons: list[dict[str, Any]]) -> str:
    codes = sorted({str(r.get("code", "")) for r in reasons if isinstance(r, dict)})
    return f" ({', '.join(codes)})" if codes else ""


def _x(value: Any) -> str:
    return f"{value:.4g}x" if positive(value) else repr(value)


def _resolve(entry: dict[str, Any], given: str | Path | None, folder: Path, role: str) -> tuple[Path, Check]:
    """The file to evaluate for ``role`` and whether its bytes are the certified ones.

    Without ``given``, the embedded bytes are written to a folder of the verifier's own, under
    the recorded file name when it is a plain one: the recorded path itself is never opened.
    """
    want = entry["sha256"]
    if given is not None:
        got = sha256_file(Path(given))
        ok = got == want
        msg = (
            f"{role} {given} matches the certificate"
            if ok
            else f"{role} {given} differs from the certified one"
        )
        return Path(given), Check(f"{role}_hash", ok, msg, want, got)
    folder.mkdir(parents=True)
    path = folder / embedded_name(entry, role)
    try:
        path.write_bytes(embedded_bytes(entry))
    except (ValueError, TypeError):
        return path, Check(f"{role}_hash", False, f"the certificate's embedded {role} is damaged", want)
    got = sha256_file(path)
    ok = got == want
    msg = (
        f"{role} rebuilt from the certificate's text"
        if ok
        else f"the certificate's embedded {role} is damaged"
    )
    return path, Check(f"{role}_hash", ok, msg, want, got)


def _notes(doc: dict[str, Any]) -> tuple[str, ...]:
    notes = []
    here = source_tree_sha256()
    made_by = doc.get("kernelproof") if isinstance(doc.get("kernelproof"), dict) else {}
    there = str(made_by.get("source_sha256"))
    if there != here:
        notes.append(
            f"kernelproof's source differs from the certificate's ({made_by.get('version')} "
            f"{there[:12]} there, {__version__} {here[:12]} here)"
        )
    env_here = host_environment()
    env_there = doc.get("environment") if isinstance(doc.get("environment"), dict) else {}
    for key in ("torch", "cuda_visible_devices", "machine"):
        if env_there.get(key) != env_here.get(key):
            notes.append(
                f"{key} differs: {env_there.get(key)!r} in the certificate, {env_here.get(key)!r} here"
            )
    return tuple(notes)


def _device_notes(cert: dict[str, Any], docs: list[dict[str, Any]]) -> tuple[str, ...]:
    """Say so when the re-run ran on another device: speedups then need not carry over."""

    def name(doc: dict[str, Any]) -> str:
        env = doc.get("environment")
        return str(env.get("device_name", "")) if isinstance(env, dict) else ""

    there = {name(r["verdict"]) for r in cert["runs"]}
    here = {name(d) for d in docs}
    if there == here:
        return ()
    return (f"device differs: {', '.join(sorted(there))} in the certificate, {', '.join(sorted(here))} here",)


def _band_notes(claim: dict[str, Any], derived: dict[str, Any]) -> tuple[str, ...]:
    """Say so when the band written in the claim is not the one the runs give (it is not used)."""
    notes = []
    claimed = claim.get("speedups") if isinstance(claim.get("speedups"), dict) else {}
    for name, band in derived["speedups"].items():
        written = (
            claimed.get(name, {}).get("rel_halfwidth_one_rerun")
            if isinstance(claimed.get(name), dict)
            else None
        )
        if written != band["rel_halfwidth_one_rerun"]:
            notes.append(
                f"the band written for {name} ({written!r}) is not the one its runs give "
                f"(±{100 * band['rel_halfwidth_one_rerun']:.1f} % for one re-run); the derived band is used"
            )
    return tuple(notes)


# ---------------------------------------------------------------------------------------------
# Runs, environment, hashes


def _timed_run(evaluate: Evaluator, task: Path, solution: Path, options: EvalOptions) -> dict[str, Any]:
    started, t0 = _now(), time.perf_counter()
    verdict = evaluate(task, solution, options)
    return {
        "seed": options.seed,
        "started_at": started,
        "finished_at": _now(),
        "wall_s": time.perf_counter() - t0,
        "verdict": verdict.to_json(),
    }


def _run_seed(base: int | None, index: int) -> int:
    """A secret seed when none is given; otherwise one derived from ``base`` per run (runs differ)."""
    if base is None:
        return secrets.randbelow(2**63)
    digest = hashlib.sha256(f"kernelproof-certificate:{base}:{index}".encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")
