"""The service's own request records: frozen, typed, validated by hand (no schema library).

A request that does not fit is answered 422 with one sentence naming the field
(:class:`RequestError`), never a traceback. The solution arrives as text in the request, never
as a path: the service reads no file a client names.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kernelproof.errors import RequestError  # defined in the one tree, raised here
from kernelproof.options import normalize_baselines
from kernelproof.serve.config import MAX_BATCH

MAX_FIELD_CHARS = 512  # a task id, a baseline name


@dataclass(frozen=True)
class EvalItem:
    """One (task, solution) to judge."""

    task_id: str  # a task id of the served task sets (or the client's name for its own reference)
    solution: str  # the solution file's text
    reference: str | None = None  # the client's own reference source (only with --trust-client-tasks)
    correctness_only: bool | None = None  # None: the operator's setting
    baselines: tuple[str, ...] | None = None  # None: the operator's


def parse_item(doc: Any, where: str = "request") -> EvalItem:
    if not isinstance(doc, dict):
        raise RequestError(f"{where} must be a JSON object")
    task_id = _text(doc, "task", where, limit=MAX_FIELD_CHARS)
    solution = _text(doc, "solution", where)
    reference = doc.get("reference")
    if reference is not None and not isinstance(reference, str):
        raise RequestError(f"{where}.reference must be a string (the reference's source text)")
    correctness_only = doc.get("correctness_only")
    if correctness_only is not None and not isinstance(correctness_only, bool):
        raise RequestError(f"{where}.correctness_only must be true or false")
    baselines = doc.get("baselines")
    if baselines is not None:
        if not isinstance(baselines, list) or not all(isinstance(b, str) for b in baselines):
            raise RequestError(f"{where}.baselines must be a list of baseline names")
        try:
            baselines = normalize_baselines(baselines)
        except ValueError as exc:
            raise RequestError(f"{where}.baselines: {exc}") from None
        if not baselines:
            raise RequestError(f"{where}.baselines names no baseline")
    unknown = sorted(set(doc) - {"task", "solution", "reference", "correctness_only", "baselines"})
    if unknown:
        raise RequestError(f"{where} has unknown field(s): {', '.join(unknown)}")
    return EvalItem(task_id, solution, reference, correctness_only, baselines)


def parse_batch(doc: Any) -> tuple[EvalItem, ...]:
    """``{"items": [...]}``, or one item on its own."""
    if isinstance(doc, dict) and "items" in doc:
        items = doc["items"]
        if not isinstance(items, list) or not items:
            raise RequestError("items must be a non-empty list of {task, solution} objects")
        if len(items) > MAX_BATCH:
            raise RequestError(f"a batch holds at most {MAX_BATCH} items, not {len(items)}", status=413)
        return tuple(parse_item(it, f"items[{i}]") for i, it in enumerate(items))
    return (parse_item(doc),)


def _text(doc: dict, name: str, where: str, limit: int | None = None) -> str:
    value = doc.get(name)
    if not isinstance(value, str) or not value.strip():
        raise RequestError(f"{where}.{name} must be a non-empty string")
    if limit is not None and len(value) > limit:
        raise RequestError(f"{where}.{name} is longer than {limit} characters")
    return value
