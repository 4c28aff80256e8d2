"""One JSON encoding for inf, -inf and nan: every document kernelproof writes round-trips them.

The round-trip tests build each document type with the value under test in every numeric field
(found from the records' annotations, so a field added later is covered too) and check that each
float comes back a float of the same value, never null and never a string.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import math
import types
import typing
from typing import Any

import pytest

from kernelproof import jsonsafe
from kernelproof.verdict import Outcome, Verdict, from_json

NONFINITE = [math.inf, -math.inf, math.nan]


def strict_loads(text: str) -> Any:
    """json.loads that refuses Infinity and NaN, as other languages' parsers do."""

    def refuse(name: str) -> Any:
        raise ValueError(f"non-standard JSON constant {name}")

    return json.loads(text, parse_constant=refuse)


def filled(tp: Any, x: float) -> Any:
    """An instance of ``tp`` with ``x`` in every float field and every optional part present."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        return filled(next(a for a in args if a is not type(None)), x)
    if dataclasses.is_dataclass(tp):
        hints = typing.get_type_hints(tp)
        return tp(**{f.name: filled(hints[f.name], x) for f in dataclasses.fields(tp) if f.name != "schema"})
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return (filled(args[0], x), filled(args[0], x))
        return tuple(filled(a, x) for a in args)
    if origin is list:
        return [filled(args[0], x), filled(args[0], x)]
    if origin is dict:
        return {"a": filled(args[1], x), "b": filled(args[1], x)}
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return next(iter(tp))
    if tp is float:
        return x
    if tp is bool:
        return True
    if tp is int:
        return 3
    return "text"  # str, and Any (free-form dicts: no field there is a number by the schema)


def shape(obj: Any) -> Any:
    """A comparable form that tells a float from a string and nan from null (nan != nan)."""
    if isinstance(obj, float):
        return ("float", repr(obj))
    if isinstance(obj, enum.Enum):
        return ("enum", obj.value)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: shape(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, dict):
        return {k: shape(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [type(obj).__name__, *(shape(v) for v in obj)]
    return (type(obj).__name__, obj)


def floats_in(obj: Any) -> list[float]:
    if isinstance(obj, float):
        return [obj]
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return [f for fld in dataclasses.fields(obj) for f in floats_in(getattr(obj, fld.name))]
    if isinstance(obj, dict):
        return [f for v in obj.values() for f in floats_in(v)]
    if isinstance(obj, (list, tuple)):
        return [f for v in obj for f in floats_in(v)]
    return []


# --- the module -------------------------------------------------------------------------------


def test_encode_spells_nonfinite_floats_as_strings_at_any_depth():
    @dataclasses.dataclass
    class Rec:
        err: float
        pair: tuple[float, float]

    doc = {"a": [math.inf, (-math.inf, 1.5)], "r": Rec(math.nan, (0.0, math.inf)), "o": Outcome.PASS, 2: "k"}
    assert jsonsafe.encode(doc) == {
        "a": ["inf", ["-inf", 1.5]],
        "r": {"err": "nan", "pair": [0.0, "inf"]},
        "o": "pass",
        "2": "k",
    }


def test_dumps_never_raises_on_nonfinite_values_and_writes_standard_json():
    text = jsonsafe.dumps({"x": [math.inf, -math.inf, math.nan]}, allow_nan=True, indent=1)
    assert strict_loads(text) == {"x": ["inf", "-inf", "nan"]}
    assert json.loads(jsonsafe.dumps(object(), default=lambda o: {"later": math.inf})) == {"later": "inf"}


@pytest.mark.parametrize("text, value", [("inf", math.inf), ("-inf", -math.inf), (1, 1.0), (2.5, 2.5)])
def test_number_reads_the_three_spellings_and_plain_numbers(text, value):
    assert jsonsafe.number(text) == value and isinstance(jsonsafe.number(text), float)


def test_number_reads_nan_and_keeps_null():
    assert math.isnan(jsonsafe.number("nan")) and jsonsafe.number(None) is None


@pytest.mark.parametrize("bad", ["Infinity", "1.5", "", True, [1.0], {"x": 1}])
def test_number_refuses_what_is_not_a_number(bad):
    with pytest.raises(ValueError, match="expected a number"):
        jsonsafe.number(bad)


# --- every document type, every numeric field --------------------------------------------------


@pytest.mark.parametrize("x", NONFINITE, ids=["inf", "-inf", "nan"])
def test_a_verdict_round_trips_nonfinite_values_in_every_numeric_field(x):
    v = filled(Verdict, x)
    assert v.stored is not None and len(floats_in(v)) > 40  # the filler reached every part
    text = v.dumps()
    back = from_json(strict_loads(text))
    assert shape(back) == shape(v)
    assert jsonsafe.encode(x) in text and "null" not in text


@pytest.mark.parametrize("x", NONFINITE, ids=["inf", "-inf", "nan"])
def test_a_stored_verdict_round_trips_nonfinite_values_through_the_store(tmp_path, x):
    from kernelproof.store import Store

    v = filled(Verdict, x)
    store = Store(tmp_path / "r.sqlite")
    store.put("k", v, limits={"timeout_s": x})
    back = store.get("k")
    assert back is not None and back.stored is not None
    original_elapsed = shape(back.stored.elapsed_s_then)
    assert shape(dataclasses.replace(back, stored=v.stored, elapsed_s=x)) == shape(v)
    assert original_elapsed == shape(x) and shape(back.stored.limits_then) == {"timeout_s": shape(x)}


@pytest.mark.parametrize("x", NONFINITE, ids=["inf", "-inf", "nan"])
def test_an_audit_report_round_trips_nonfinite_errors(x):
    from kernelproof.verify.audit import AuditReport, Control

    report = AuditReport("t.py", "default", True, (Control("zeros", False, x, "n"), Control("mean", True, x)))
    back = AuditReport.from_json(strict_loads(json.dumps(report.to_json(), allow_nan=False)))
    assert shape(back) == shape(report)


@pytest.mark.parametrize("x", NONFINITE, ids=["inf", "-inf", "nan"])
def test_a_replay_log_line_round_trips_a_nonfinite_cost(x):
    from kernelproof.agent.call_records import LoggedCall

    call = LoggedCall(1, 0, "draft", "h", "answer", 10, 20, x, "stop", "m")
    back = LoggedCall.from_json(strict_loads(json.dumps(call.to_json(), allow_nan=False)))
    assert shape(back) == shape(call)


@pytest.mark.parametrize("x", NONFINITE, ids=["inf", "-inf", "nan"])
def test_the_agents_stored_calls_and_candidates_round_trip_nonfinite_values(tmp_path, x):
    from kernelproof.agent.call_records import Candidate, Completion, Message, Prompt
    from kernelproof.agent.memory import Memory

    mem = Memory(tmp_path / "kp.db")
    mem.create_run(run_id="r", task_path="t.py", task_sha256="0" * 64, model="m", strategy="refine",
                   out_dir=str(tmp_path), options_json="{}")  # fmt: skip
    prompt = Prompt("sys", (Message("user", "go"),))
    mem.record_call("r", 0, 0, "draft", prompt, Completion("a", 1, 2, "stop", "m", 1, x), cost_usd=x)
    call = mem.calls("r")[0]
    assert shape(call["cost_usd"]) == shape(x) and shape(call["latency_s"]) == shape(x)
    assert shape(mem.logged_calls("r")[(0, 0)].cost_usd) == shape(x)

    c = Candidate(
        "t000s00", 0, 0, "draft", ("p",), "", "", "a.py", "src", "h", verdict=filled(Verdict, x), gpu_s=x
    )
    mem.record_candidate("r", c)
    (back,) = mem.candidates("r")
    assert shape(back.verdict) == shape(c.verdict) and shape(back.gpu_s) == shape(x)
