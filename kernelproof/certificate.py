"""The certificate document: its schema, how it is written and read, and what a re-run takes from it.

A certificate (docs/certificates.md) embeds the task and the solution (path, sha256, text), the
settings that decide a verdict, and the runs. Everything in it may have been written by someone
else, so reading it back is defensive: its structure is checked before anything is used, each
recorded setting is type-checked, an embedded file is rebuilt in a folder of the reader's own
under a plain file name, and only the settings that change a verdict are taken for a re-run.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import os
import platform
import re
import sys
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from kernelproof import jsonsafe, signing
from kernelproof.errors import CertificateError  # defined in the one tree, raised here
from kernelproof.options import EvalOptions

CERT_SCHEMA = "kernelproof.certificate/1"
# The settings a certificate records and a re-run takes from it: those that change a verdict.
# Store, build cache, workers, parallelism and timeouts are the verifier's own.
RECORDED_SETTINGS = tuple(k for k in EvalOptions().cache_key_fields() if k != "seed")
_SAFE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}\.py")


def finite_json(obj: Any) -> Any:
    """``obj`` with every non-finite float written as the string "inf", "-inf" or "nan": the rule
    every JSON writer of kernelproof follows (kernelproof/jsonsafe.py)."""
    return jsonsafe.encode(obj)


def write_certificate(cert: dict[str, Any], path: str | Path, key: Ed25519PrivateKey | None = None) -> Path:
    """Write ``cert`` as JSON (non-finite numbers as strings), signed with ``key`` when given.

    A certificate records verdicts its runs reached: one whose run ended as an error (a busy
    machine, a missing toolkit, kernelproof's own failure) claims nothing about the pair, and
    verifying it would only say that the same error comes again. CertificateError, nothing written.
    """
    errors = [run for run in cert.get("runs", []) if (run.get("verdict") or {}).get("verdict") == "error"]
    if errors:
        first = errors[0]
        codes = (
            ", ".join(sorted({str(r.get("code")) for r in (first.get("verdict") or {}).get("reasons") or []}))
            or "error"
        )
        raise CertificateError(
            f"{len(errors)} of {len(cert.get('runs', []))} runs ended as an error ({codes}, the run with seed "
            f"{first.get('seed')}): a certificate records verdicts its runs reached, so none was written"
        )
    doc = finite_json(cert)
    if key is not None:
        doc = signing.sign(doc, key)
    out = Path(path)
    out.write_text(json.dumps(doc, indent=1, allow_nan=False) + "\n", encoding="utf-8")
    return out


def read_certificate(path: str | Path) -> dict[str, Any]:
    try:
        cert = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise CertificateError(f"{path}: cannot read a certificate ({err})") from err
    if not isinstance(cert, dict) or cert.get("schema") != CERT_SCHEMA:
        raise CertificateError(f"{path}: not a {CERT_SCHEMA} document")
    return cert


def check_structure(doc: dict[str, Any]) -> None:
    """Raise a CertificateError naming the first field a verification needs that is missing or odd."""

    def need(ok: bool, where: str) -> None:
        if not ok:
            raise CertificateError(f"damaged certificate: {where} is missing or malformed")

    runs = doc.get("runs")
    need(isinstance(runs, list) and len(runs) >= 2, "runs (at least two)")
    for i, run in enumerate(runs):
        need(isinstance(run, dict) and isinstance(run.get("verdict"), dict), f"runs[{i}].verdict")
        seed = run.get("seed")
        need(isinstance(seed, int) and not isinstance(seed, bool), f"runs[{i}].seed")
    for role in ("task", "solution"):
        entry = doc.get(role)
        need(isinstance(entry, dict) and isinstance(entry.get("sha256"), str), f"{role}.sha256")
    need(isinstance(doc.get("settings"), dict), "settings")
    need(isinstance(doc.get("claim"), dict), "claim")


def rerun_options(settings: dict[str, Any], build_cache: Path, timeout_s: float) -> EvalOptions:
    """The certified verdict-deciding settings, each type-checked; all else is the verifier's own:
    fresh, samples kept, no store, a build cache of its own, its own timeout."""
    defaults = EvalOptions()
    values = {}
    for name in RECORDED_SETTINGS:
        if name in settings:
            values[name] = _typed(name, settings[name], getattr(defaults, name))
    return EvalOptions(**values).replace(
        fresh=True,
        keep_samples=True,
        db="",
        build_cache=str(build_cache),
        build_workers=0,
        per_device=1,
        timeout_s=timeout_s,
    )


OPTIONAL_TEXT_SETTINGS = ("policy", "precision")  # settings whose default is None and whose value is text


def _typed(name: str, value: Any, default: Any) -> Any:
    if value is None and default is None:  # an optional setting left to the task (policy, seed)
        return None
    if name == "distributions" or isinstance(default, tuple):
        if value is None and name == "distributions":
            return None
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            return tuple(value)
    elif isinstance(default, bool):
        if isinstance(value, bool):
            return value
    elif isinstance(default, int):
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif isinstance(default, float):
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            return float(value)
    elif isinstance(default, str) and isinstance(value, str):
        return value
    elif default is None and isinstance(value, str) and name in OPTIONAL_TEXT_SETTINGS:
        return value
    raise CertificateError(f"damaged certificate: settings.{name} is {value!r}")


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


def embedded_name(entry: dict[str, Any], role: str) -> str:
    """The recorded file name when it is a plain one (never a path), else ``task.py``/``solution.py``."""
    name = Path(str(entry.get("path", ""))).name
    return name if _SAFE_NAME.fullmatch(name) else f"{role}.py"


def embedded_bytes(entry: dict[str, Any]) -> bytes:
    if "text" in entry:
        return str(entry["text"]).encode("utf-8")
    return base64.b64decode(str(entry.get("base64", "")), validate=True)


def sha256_file(path: Path) -> str:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return ""
