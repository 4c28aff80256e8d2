"""Read verdict documents for a report: from JSON files, folders of them, or a result store.

Reports consume only ``kernelproof.verdict/2`` (and ``/1``) documents (the one shared language),
as plain dicts with their numeric fields decoded ("inf" back to a float). Every document is
checked for its schema tag, so a report never silently mixes in something else.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from kernelproof.errors import ReportInputError, StoreError  # ReportInputError: defined in the one tree
from kernelproof.verdict import READABLE_SCHEMAS, SCHEMA, numbers_decoded


def load_documents(paths: Iterable[str | Path] = (), db: str | Path | None = None) -> list[dict[str, Any]]:
    """Verdict documents from JSON files/folders and from a store, newest kept per evaluation.

    A JSON file holds one document, a list of them, or one per line (``.jsonl``). A folder is read
    for its ``*.json`` and ``*.jsonl`` files. See :func:`deduplicate` for which repeats are dropped.
    """
    docs: list[dict[str, Any]] = []
    for path in paths:
        docs.extend(_read_path(Path(path)))
    if db is not None:
        docs.extend(read_store(db))
    return deduplicate(docs)


def read_store(db: str | Path) -> list[dict[str, Any]]:
    """Every verdict document held by the results store at ``db`` (the one place that reads it)."""
    from kernelproof.store import Store

    path = Path(db)
    if not path.is_file():
        raise ReportInputError(f"{path}: no such store")
    try:
        docs = Store(path, readonly=True).query()  # read only: a store on a read-only mount is read too
    except StoreError as err:
        raise ReportInputError(f"not a verdict store: {err}") from err
    return [_checked(doc, str(path)) for doc in docs]


def _read_path(path: Path) -> list[dict[str, Any]]:
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.suffix in (".json", ".jsonl"))
        return [doc for f in files for doc in _read_file(f)]
    if not path.is_file():
        raise ReportInputError(f"{path}: no such file or folder")
    return _read_file(path)


def _read_file(path: Path) -> list[dict[str, Any]]:
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".jsonl":
        items = [_parse(line, f"{path}:{n}") for n, line in enumerate(text.splitlines(), 1) if line.strip()]
    else:
        parsed = _parse(text, str(path))
        items = parsed if isinstance(parsed, list) else [parsed]
    return [_checked(item, str(path)) for item in items]


def _parse(text: str, where: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise ReportInputError(f"{where}: not JSON ({err})") from err


def _checked(doc: Any, where: str) -> dict[str, Any]:
    if not isinstance(doc, dict):
        raise ReportInputError(f"{where}: expected a {SCHEMA} object, found {type(doc).__name__}")
    if doc.get("schema") not in READABLE_SCHEMAS:
        raise ReportInputError(f"{where}: not a {SCHEMA} document (schema={doc.get('schema')!r})")
    return numbers_decoded(doc)


# Settings that bound or budget a measurement, or say where it ran from: they do not change what is
# measured, so two verdicts that differ only in them are one solution's, judged twice. bench's
# timing budget (10 s) is not eval's (20 s): the same solution judged by both was listed twice.
SAME_MEASUREMENT = frozenset(
    {
        "seed",
        "fresh",
        "db",
        "timeout_s",
        "import_timeout_s",
        "case_timeout_s",
        "timing_timeout_s",
        "evaluation_timeout_s",
        "keep_samples",
        "per_device",
        "time_budget_s",
        "min_rounds",
        "max_rounds",
        "calls_per_round",
        "target_ci_halfwidth",
        "build_cache",
        "build_workers",
        "require_sandbox",
        "cases",
    }
)


def deduplicate(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Keep the newest document per (task hash, solution hash, settings that change what is measured).

    Why: a store keeps every evaluation, and a report built from a store plus exported JSON, or from
    one solution judged by eval and by bench, would otherwise list it twice and count it twice in
    fast_p. Order of first appearance is kept.
    """
    ignored = SAME_MEASUREMENT
    newest: dict[str, dict[str, Any]] = {}
    order: list[str] = []
    for doc in docs:
        settings = {k: v for k, v in (doc.get("settings") or {}).items() if k not in ignored}
        key = json.dumps(
            [doc["task"].get("sha256"), doc["solution"].get("sha256"), settings],
            sort_keys=True,
            default=str,
        )
        if key not in newest:
            order.append(key)
            newest[key] = doc
        elif str(doc.get("created_at", "")) >= str(newest[key].get("created_at", "")):
            newest[key] = doc
    return [newest[k] for k in order]
