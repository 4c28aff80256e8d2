"""Certificates: a claim about one (task, solution) pair that anyone can re-run and check.

``certify`` evaluates the pair in at least two independent runs (fresh evaluations, separate
seeds, raw samples kept) and writes one JSON document with the environment, the sha256 of
kernelproof's source tree, of the task and of the solution (their text embedded), the seeds,
settings, every run's full verdict, and the equivalence band calibrated from the spread between
the runs. ``verify`` re-runs the certificate and says whether the result holds: the verdict is
the same, and every certified speedup is inside its band. docs/certificates.md states the rule.

Why a band from run-to-run spread: a within-run CI describes the noise of one session only. A
re-run happens in another session (clocks, placement, thermal state), and an honest claim
checked against a within-run CI alone would often fail.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import math
import os
import platform
import secrets
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import kernelproof
from kernelproof.errors import UsageError
from kernelproof.options import EvalOptions
from kernelproof.source import source_tree_sha256
from kernelproof.verdict import Verdict

CERT_SCHEMA = "kernelproof.certificate/1"
VERIFY_SCHEMA = "kernelproof.verify/1"
BAND_FLOOR = 0.03  # relative: session-to-session drift a re-run may show (docs/certificates.md)
PREDICTION_LEVEL = 0.95  # two-sided level of the prediction interval for a re-run's speedup
# Student t quantiles t(0.975, df) for df = 1..30 (standard tables); beyond 30 the normal 1.96 is used.
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145,
         2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048,
         2.045, 2.042)  # fmt: skip

Evaluator = Callable[[Any, Any, EvalOptions], Verdict]


class CertificateError(UsageError):
    """A certificate that cannot be made or read (misuse or a damaged file; not a failed claim)."""


def certify(
    task: str | Path,
    solution: str | Path,
    options: EvalOptions | None = None,
    runs: int = 2,
    *,
    evaluate: Evaluator | None = None,
) -> dict[str, Any]:
    """Evaluate ``runs`` times independently and return the certificate document.

    Each run is a fresh evaluation (``fresh=True``: nothing served from a store) with its own
    seed and ``keep_samples=True``. ``evaluate`` defaults to :func:`kernelproof.api.evaluate`.
    """
    if runs < 2:
        raise CertificateError("a certificate needs at least two independent runs to calibrate its band")
    evaluate = evaluate or _default_evaluate()
    base = (options or EvalOptions()).replace(fresh=True, keep_samples=True)
    task_p, sol_p = Path(task), Path(solution)
    records = []
    for i in range(runs):
        seed = _run_seed(base.seed, i)
        records.append(_timed_run(evaluate, task_p, sol_p, base.replace(seed=seed)))
    docs = [r["verdict"] for r in records]
    return {
        "schema": CERT_SCHEMA,
        "created_at": _now(),
        "kernelproof": {"version": kernelproof.__version__, "source_sha256": source_tree_sha256()},
        "environment": host_environment(),
        "task": embed_file(task_p),
        "solution": embed_file(sol_p),
        "settings": _settings_json(base.replace(seed=None)),
        "seeds": [r["seed"] for r in records],
        "runs": records,
        "claim": _claim(docs),
    }


def write_certificate(cert: dict[str, Any], path: str | Path) -> Path:
    out = Path(path)
    out.write_text(json.dumps(cert, indent=1, allow_nan=False) + "\n", encoding="utf-8")
    return out


def read_certificate(path: str | Path) -> dict[str, Any]:
    try:
        cert = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as err:
        raise CertificateError(f"{path}: cannot read a certificate ({err})") from err
    if not isinstance(cert, dict) or cert.get("schema") != CERT_SCHEMA:
        raise CertificateError(f"{path}: not a {CERT_SCHEMA} document")
    return cert


# ---------------------------------------------------------------------------------------------
# The equivalence band


def t_quantile(df: int) -> float:
    """t(0.975, df): the two-sided 95 % Student t quantile."""
    if df < 1:
        raise ValueError("df must be at least 1")
    return _T975[df - 1] if df <= len(_T975) else 1.96


def band_halfwidth_log(band: dict[str, Any], reruns: int = 1) -> float:
    """Half-width, in log space, inside which the mean log speedup of ``reruns`` new runs must fall.

    The largest of: the floor; the 95 % prediction interval from the certificate's runs,
    ``t(0.975, n-1) * s * sqrt(1/reruns + 1/n)``; and the widest within-run CI (between-run
    noise is never smaller than within-run noise).
    """
    n, s = band["runs"], band["log_sd"]
    predicted = t_quantile(n - 1) * s * math.sqrt(1.0 / reruns + 1.0 / n)
    return max(math.log1p(band["floor"]), predicted, band["within_run_log_halfwidth"])


def calibrate_band(run_speedups: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The band of one baseline from its ``speedup`` entries in every run, or None if any is missing."""
    medians = [s.get("median") if s else None for s in run_speedups]
    if not medians or any(not _positive(m) for m in medians):
        return None
    logs = [math.log(m) for m in medians]
    mean = sum(logs) / len(logs)
    sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / (len(logs) - 1))
    within = 0.0
    for s in run_speedups:
        ci = s.get("ci95")
        if ci and _positive(ci[0]) and _positive(ci[1]):
            within = max(within, (math.log(ci[1]) - math.log(ci[0])) / 2)
    band = {
        "center": math.exp(mean),  # geometric mean of the runs' medians
        "runs": len(logs),
        "log_sd": sd,  # sample standard deviation of log speedups across runs
        "within_run_log_halfwidth": within,
        "floor": BAND_FLOOR,
        "level": PREDICTION_LEVEL,
    }
    band["rel_halfwidth_one_rerun"] = math.expm1(band_halfwidth_log(band, 1))
    return band


def _claim(docs: list[dict[str, Any]]) -> dict[str, Any]:
    outcomes = [d["verdict"] for d in docs]
    consistent = len(set(outcomes)) == 1
    claim: dict[str, Any] = {
        "verdict": outcomes[0] if consistent else "inconsistent",
        "consistent": consistent,
        "outcomes": outcomes,
        "codes": sorted({r["code"] for d in docs for r in d.get("reasons", [])}),
        "speedups": {},
    }
    if consistent and outcomes[0] == "pass":
        names = set.intersection(*(set(d.get("speedup") or {}) for d in docs))
        for name in sorted(names):
            band = calibrate_band([d["speedup"][name] for d in docs])
            if band is not None:
                claim["speedups"][name] = band
    return claim


# ---------------------------------------------------------------------------------------------
# Verification


@dataclass(frozen=True)
class Check:
    name: str  # "verdict", "speedup:eager", "task_hash", ...
    passed: bool  # whether this part of the claim holds
    message: str  # one sentence a person can act on
    certified: float | str | None = None  # what the certificate claims
    observed: float | str | None = None  # what the re-run found
    band_rel: float | None = None  # relative half-width allowed (speedups only)


@dataclass(frozen=True)
class VerifyResult:
    holds: bool  # every check passed
    checks: tuple[Check, ...]  # in the order they were made
    notes: tuple[str, ...] = ()  # differences that do not decide (kernelproof version, device)
    verdicts: tuple[dict[str, Any], ...] = ()  # the re-runs' verdict documents
    schema: str = VERIFY_SCHEMA

    @property
    def reasons(self) -> list[str]:
        """Why the result does not hold (empty when it does)."""
        return [c.message for c in self.checks if not c.passed]

    def to_json(self) -> dict[str, Any]:
        return json.loads(json.dumps(dataclasses.asdict(self), allow_nan=False))


def verify(
    cert: str | Path | dict[str, Any],
    *,
    evaluate: Evaluator | None = None,
    reruns: int = 1,
    task: str | Path | None = None,
    solution: str | Path | None = None,
    fresh_seeds: bool = False,
) -> VerifyResult:
    """Re-run a certificate and decide whether its claim holds.

    The re-runs use the certificate's settings and its recorded seeds (the same cases), or new
    secret seeds with ``fresh_seeds``. ``task``/``solution`` name files to check in place of the
    embedded text; their hashes must match the certificate's.
    """
    doc = cert if isinstance(cert, dict) else read_certificate(cert)
    if reruns < 1:
        raise CertificateError("verify needs at least one re-run")
    evaluate = evaluate or _default_evaluate()
    claim = doc["claim"]
    if not claim["consistent"]:
        msg = (
            f"the certificate's own runs disagree ({', '.join(claim['outcomes'])}): nothing stable to verify"
        )
        return VerifyResult(False, (Check("certificate", False, msg),))
    with tempfile.TemporaryDirectory(prefix="kernelproof-verify-") as tmp:
        checks, paths = [], {}
        for role, given in (("task", task), ("solution", solution)):
            path, check = _resolve(doc[role], given, Path(tmp) / role, role)
            checks.append(check)
            paths[role] = path
        if not all(c.passed for c in checks):
            return VerifyResult(False, tuple(checks), _notes(doc))
        options = _options_from(doc["settings"])
        docs = []
        for i in range(reruns):
            seed = _run_seed(None, i) if fresh_seeds else doc["seeds"][i % len(doc["seeds"])]
            run = _timed_run(evaluate, paths["task"], paths["solution"], options.replace(seed=seed))
            docs.append(run["verdict"])
    checks += _compare(claim, docs)
    notes = _notes(doc) + _device_notes(doc, docs)
    return VerifyResult(all(c.passed for c in checks), tuple(checks), notes, tuple(docs))


def _compare(claim: dict[str, Any], docs: list[dict[str, Any]]) -> list[Check]:
    outcomes = [d["verdict"] for d in docs]
    same = all(o == claim["verdict"] for o in outcomes)
    seen = ", ".join(outcomes)
    msg = (
        f"verdict {claim['verdict']} reproduced"
        if same
        else f"the certificate says {claim['verdict']}, the re-run says {seen}"
        + _codes_text([r for d in docs for r in d.get("reasons", [])])
    )
    checks = [Check("verdict", same, msg, claim["verdict"], seen)]
    if not same:
        return checks
    for name, band in claim["speedups"].items():
        checks.append(_compare_speedup(name, band, docs))
    return checks


def _compare_speedup(name: str, band: dict[str, Any], docs: list[dict[str, Any]]) -> Check:
    medians = [(d.get("speedup") or {}).get(name, {}).get("median") for d in docs]
    if any(not _positive(m) for m in medians):
        return Check(f"speedup:{name}", False, f"the re-run has no speedup against {name}", band["center"])
    observed = math.exp(sum(math.log(m) for m in medians) / len(medians))
    half = band_halfwidth_log(band, len(medians))
    rel = math.expm1(half)
    lo, hi = band["center"] * math.exp(-half), band["center"] * math.exp(half)
    inside = abs(math.log(observed) - math.log(band["center"])) <= half
    where = "inside" if inside else "outside"
    msg = (
        f"speedup against {name}: certified {band['center']:.4g}x, re-run {observed:.4g}x, "
        f"{where} the band [{lo:.4g}, {hi:.4g}] (±{100 * rel:.1f} %)"
    )
    return Check(f"speedup:{name}", inside, msg, band["center"], observed, rel)


def _codes_text(reasons: list[dict[str, Any]]) -> str:
    codes = sorted({r.get("code", "") for r in reasons})
    return f" ({', '.join(codes)})" if codes else ""


def _resolve(entry: dict[str, Any], given: str | Path | None, folder: Path, role: str) -> tuple[Path, Check]:
    """The file to evaluate for ``role`` and whether its bytes are the certified ones."""
    want = entry["sha256"]
    if given is not None:
        got = _sha256_file(Path(given))
        ok = got == want
        msg = (
            f"{role} {given} matches the certificate"
            if ok
            else f"{role} {given} differs from the certified one"
        )
        return Path(given), Check(f"{role}_hash", ok, msg, want, got)
    recorded = Path(entry["path"])
    if recorded.is_file() and _sha256_file(recorded) == want:
        return recorded, Check(f"{role}_hash", True, f"{role} {recorded} matches the certificate", want, want)
    folder.mkdir(parents=True)
    path = folder / Path(entry["path"]).name
    path.write_bytes(_embedded_bytes(entry))
    got = _sha256_file(path)
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
    if doc["kernelproof"]["source_sha256"] != here:
        notes.append(
            f"kernelproof's source differs from the certificate's ({doc['kernelproof']['version']} "
            f"{doc['kernelproof']['source_sha256'][:12]} there, {kernelproof.__version__} {here[:12]} here)"
        )
    env_here, env_there = host_environment(), doc.get("environment", {})
    for key in ("torch", "cuda_visible_devices", "machine"):
        if env_there.get(key) != env_here.get(key):
            notes.append(
                f"{key} differs: {env_there.get(key)!r} in the certificate, {env_here.get(key)!r} here"
            )
    return tuple(notes)


def _device_notes(cert: dict[str, Any], docs: list[dict[str, Any]]) -> tuple[str, ...]:
    """Say so when the re-run ran on another device: speedups then need not carry over."""

    def name(doc: dict[str, Any]) -> str:
        return str((doc.get("environment") or {}).get("device_name", ""))

    there = {name(r["verdict"]) for r in cert["runs"]}
    here = {name(d) for d in docs}
    if there == here:
        return ()
    return (f"device differs: {', '.join(sorted(there))} in the certificate, {', '.join(sorted(here))} here",)


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


def _settings_json(options: EvalOptions) -> dict[str, Any]:
    """The options as JSON, less the store path (a path on the certifying machine only)."""
    settings = dataclasses.asdict(options)
    settings.pop("db")
    return {k: list(v) if isinstance(v, tuple) else v for k, v in settings.items()}


def _options_from(settings: dict[str, Any]) -> EvalOptions:
    """The certified options for a re-run: fresh, samples kept, nothing read from or written to a store."""
    known = {f.name for f in dataclasses.fields(EvalOptions)} - {"db"}
    values = {k: tuple(v) if isinstance(v, list) else v for k, v in settings.items() if k in known}
    return EvalOptions(**values).replace(fresh=True, keep_samples=True, db="")


def host_environment() -> dict[str, Any]:
    """The certifying host: Python, platform, torch (versions only; the device is left untouched)."""
    env: dict[str, Any] = {
        "python": platform.python_version(),
        "implementation": sys.implementation.name,
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
    }
    try:
        import torch

        env["torch"] = torch.__version__
        env["torch_cuda"] = torch.version.cuda
    except ImportError:  # pragma: no cover - torch is a dependency
        env["torch"] = None
    return env


def embed_file(path: Path) -> dict[str, Any]:
    """Path, sha256 and contents (UTF-8 text, or base64 when the bytes are not text)."""
    try:
        data = path.read_bytes()
    except OSError as err:
        raise CertificateError(f"{path}: cannot read ({err})") from err
    entry: dict[str, Any] = {"path": str(path), "sha256": hashlib.sha256(data).hexdigest()}
    try:
        entry["text"] = data.decode("utf-8")
    except UnicodeDecodeError:
        entry["base64"] = base64.b64encode(data).decode("ascii")
    return entry


def _embedded_bytes(entry: dict[str, Any]) -> bytes:
    if "text" in entry:
        return entry["text"].encode("utf-8")
    return base64.b64decode(entry.get("base64", ""))


def _sha256_file(path: Path) -> str:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return ""


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _positive(x: Any) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x) and x > 0


def _default_evaluate() -> Evaluator:
    from kernelproof.api import evaluate

    return evaluate
