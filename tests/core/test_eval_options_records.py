"""EvalOptions, the api's one options type, is made of the small records the layers read: the timing
policy (all that measure/ reads), the time limits and the placement. Derived, never stored apart,
so the store's key and every constructor stay as they were."""

from __future__ import annotations

import ast
import dataclasses

import pytest
from cli_support import REPO

from kernelproof.options import EvalOptions, Placement, TimeLimits, TimingPolicy

RECORDS = {"timing": TimingPolicy, "limits": TimeLimits, "placement": Placement}


@pytest.mark.parametrize(("name", "record"), RECORDS.items())
def test_each_record_is_read_from_the_options_it_belongs_to(name, record):
    asked = EvalOptions(
        device="cpu", per_device=3, cpu_threads=2, time_budget_s=1.5, max_rounds=7, min_rounds=2,
        calls_per_round=3, target_ci_halfwidth=0.05, keep_samples=True, time_when_busy=True,
        timeout_s=9.0, import_timeout_s=8.0, case_timeout_s=7.0, timing_timeout_s=6.0,
        evaluation_timeout_s=5.0,
    )  # fmt: skip
    got = getattr(asked, name)
    assert isinstance(got, record)
    for f in dataclasses.fields(record):
        assert getattr(got, f.name) == getattr(asked, f.name) != getattr(EvalOptions(), f.name), f.name
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(got, dataclasses.fields(record)[0].name, None)


@pytest.mark.parametrize("record", RECORDS.values())
def test_a_record_s_defaults_are_the_options_defaults(record):
    assert getattr(EvalOptions(), next(k for k, v in RECORDS.items() if v is record)) == record()


def test_the_step_limits_are_the_limits_own():
    o = EvalOptions(timeout_s=50.0, case_timeout_s=300.0, import_timeout_s=10.0)
    assert o.step_limit("case") == o.limits.step_limit("case") == 50.0
    assert o.step_limit("import") == 10.0


def test_the_store_key_is_what_it_was():
    """The records add no field: the key is the flat options' (store.py, verdict settings)."""
    key = EvalOptions().cache_key_fields()
    assert not {"timing", "limits", "placement"} & set(key)
    assert {"time_budget_s", "max_rounds", "device", "cpu_threads"} <= set(key)
    assert not {"timeout_s", "per_device"} & set(key)


def test_measure_reads_its_timing_policy_alone():
    """No module of measure/ imports EvalOptions: a timing decision can only read the policy."""
    offenders = []
    for path in sorted((REPO / "kernelproof" / "measure").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module == "kernelproof.options":
                names = {a.name for a in node.names}
                if names - {"TimingPolicy"}:
                    offenders.append(f"{path.name}: {sorted(names)}")
    assert not offenders, offenders
