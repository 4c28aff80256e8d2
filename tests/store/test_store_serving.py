"""What the store answers with (issue 19): every outcome-changing option keyed, a timeout served
only for an equal or smaller limit, and a stored verdict that says it is stored."""

from __future__ import annotations

import io
import json

import pytest
from rich.console import Console

from kernelproof import api
from kernelproof.console import print_verdict
from kernelproof.options import EvalOptions
from kernelproof.store import Store, served
from kernelproof.verdict import FileRef, Outcome, Reason, ReasonCode, Verdict, from_json

TASK, SOL = "tests/data/tasks/scale_relu.py", "tests/data/solutions/wrong_dtype.py"


def verdict(code: ReasonCode | None) -> Verdict:
    return Verdict(
        verdict=Outcome.PASS if code is None else Outcome.FAIL,
        reasons=() if code is None else (Reason(code, "stored"),),
        task=FileRef(TASK, "a" * 64),
        solution=FileRef(SOL, "b" * 64),
        correctness=None,
        timing=None,
        speedup={},
        roofline=None,
        coverage=None,
        environment={"device": "cpu"},
        reward=0.0,
        elapsed_s=20.4,
        created_at="2026-12-01T10:00:00+00:00",
    )


@pytest.mark.parametrize("asked, served_", [(20.0, True), (5.0, True), (20.5, False), (600.0, False)])
def test_a_timeout_is_served_only_for_an_equal_or_smaller_limit(tmp_path, asked, served_):
    store = Store(tmp_path / "r.sqlite")
    store.put("k", verdict(ReasonCode.TIMEOUT), limits={"timeout_s": 20.0})
    assert (served(store, "k", {"timeout_s": asked}) is not None) is served_


@pytest.mark.parametrize("code", [None, ReasonCode.MISMATCH, ReasonCode.WRONG_DTYPE])
def test_other_verdicts_are_served_whatever_the_limit(tmp_path, code):
    store = Store(tmp_path / "r.sqlite")
    store.put("k", verdict(code), limits={"timeout_s": 20.0})
    for asked in (1.0, 20.0, 600.0):
        assert served(store, "k", {"timeout_s": asked}) is not None


@pytest.mark.parametrize(
    "phase", ["import_timeout_s", "case_timeout_s", "timing_timeout_s", "evaluation_timeout_s"]
)
def test_a_timeout_is_not_served_when_any_phase_limit_is_larger(tmp_path, phase):
    store, limits = Store(tmp_path / "r.sqlite"), EvalOptions(timeout_s=20.0).time_limits()
    store.put("k", verdict(ReasonCode.TIMEOUT), limits=limits)
    assert served(store, "k", limits) is not None
    assert served(store, "k", {**limits, phase: limits[phase] * 2}) is None
    assert served(store, "k", {**limits, phase: limits[phase] / 2}) is not None


@pytest.mark.parametrize("code", [ReasonCode.TIMEOUT, ReasonCode.CRASH])
@pytest.mark.parametrize("asked, served_", [(4, True), (6, True), (1, False), (3, False)])
def test_a_timeout_or_crash_is_served_only_with_as_many_evaluations_sharing_the_device(
    tmp_path, code, asked, served_
):
    store, conditions = Store(tmp_path / "r.sqlite"), EvalOptions(per_device=4).serving_conditions()
    store.put("k", verdict(code), limits=conditions)
    assert (served(store, "k", {**conditions, "per_device": float(asked)}) is not None) is served_


@pytest.mark.parametrize("code", [None, ReasonCode.MISMATCH])
@pytest.mark.parametrize("asked", [1, 4, 6])
def test_a_pass_or_a_mismatch_is_served_whatever_the_sharing(tmp_path, code, asked):
    store, conditions = Store(tmp_path / "r.sqlite"), EvalOptions(per_device=4).serving_conditions()
    store.put("k", verdict(code), limits=conditions)
    assert served(store, "k", {**conditions, "per_device": float(asked)}) is not None


def test_a_crash_stored_without_its_sharing_is_not_served(tmp_path):
    store = Store(tmp_path / "r.sqlite")
    store.put("k", verdict(ReasonCode.CRASH), limits=EvalOptions().time_limits())  # an older row
    assert served(store, "k", EvalOptions().serving_conditions()) is None


def test_a_sweep_resumed_at_another_per_device_is_served_what_passed(tmp_path):
    db = tmp_path / "r.sqlite"
    opts = EvalOptions(device="cpu", correctness_only=True, db=str(db), per_device=4)
    first = api.evaluate(TASK, SOL, opts)
    assert first.stored is None and first.codes == ["wrong_dtype"]
    again = api.evaluate(TASK, SOL, opts.replace(per_device=6))
    assert again.stored is not None and again.stored.limits_then["per_device"] == 4.0


def test_a_timeout_stored_without_its_limit_is_not_served(tmp_path):
    store = Store(tmp_path / "r.sqlite")
    store.put("k", verdict(ReasonCode.TIMEOUT))  # as an executor that does not pass limits stores it
    assert served(store, "k", {"timeout_s": 1.0}) is None and served(store, "k") is None


def test_an_internal_error_is_never_served(tmp_path):
    store = Store(tmp_path / "r.sqlite")
    store.put("k", verdict(ReasonCode.INTERNAL_ERROR), limits={"timeout_s": 20.0})
    assert served(store, "k", {"timeout_s": 20.0}) is None


def test_eval_serves_a_stored_timeout_only_under_a_smaller_limit_and_records_its_own(tmp_path):
    db = tmp_path / "r.sqlite"
    opts = EvalOptions(device="cpu", correctness_only=True, db=str(db), timeout_s=20.0)
    store = Store(db)
    store.put(
        api.evaluation_key(TASK, SOL, opts, "cpu"),
        verdict(ReasonCode.TIMEOUT),
        limits=opts.serving_conditions(),
    )
    smaller = api.evaluate(TASK, SOL, opts.replace(timeout_s=10.0))
    assert smaller.codes == ["timeout"] and smaller.stored is not None
    assert smaller.stored.limits_then == opts.serving_conditions() and smaller.stored.elapsed_s_then == 20.4
    larger = api.evaluate(TASK, SOL, opts.replace(timeout_s=60.0))
    assert larger.stored is None and larger.codes == ["wrong_dtype"]  # evaluated again
    assert store.rows()[0].limits == opts.replace(timeout_s=60.0).serving_conditions()
    again = api.evaluate(TASK, SOL, opts.replace(timeout_s=5.0))  # not a timeout: any limit
    assert again.stored is not None and again.codes == ["wrong_dtype"]


# Options that do not change what is measured, and a value that differs from the default.
UNKEYED = {
    "fresh": True,
    "db": "elsewhere.sqlite",
    "timeout_s": 5.0,
    "import_timeout_s": 5.0,
    "case_timeout_s": 5.0,
    "timing_timeout_s": 5.0,
    "evaluation_timeout_s": 5.0,
    "build_cache": "/tmp/c",
    "build_workers": 3,
    "require_sandbox": True,
    "per_device": 2,  # recorded with the row instead: a crash or timeout is served only at as much sharing
    "refuse_plain_first": False,  # where no_custom_kernel is decided, not whether (the re-run alone only)
}
KEYED = {
    "baselines": ("eager", "compile:default"),
    "seed": 7,
    "correctness_only": True,
    "kernelbench_compat": True,
    "eval_mode": True,
    "shape_variants": "auto",
    "seeds_per_case": 3,
    "distributions": ("normal",),
    "time_budget_s": 5.0,
    "min_rounds": 3,
    "max_rounds": 9,
    "calls_per_round": 2,
    "target_ci_halfwidth": 0.05,
    "keep_samples": True,
    "steady": True,
    "sanitize": True,
    "refuse_random_reference": True,
    "policy": "library-ok",
    "cpu_threads": 2,
    "time_when_busy": True,
    "precision": "bf16",  # the contract the task is judged in (--precision)
    "time_interpreted": True,  # an interpreted CPU candidate timed, or not
}


def test_every_option_is_either_keyed_or_deliberately_left_out():
    import dataclasses

    names = {f.name for f in dataclasses.fields(EvalOptions)} - {"device"}  # the device is keyed apart
    assert names == set(UNKEYED) | set(KEYED)


@pytest.mark.parametrize("name", sorted(KEYED))
def test_an_option_that_can_change_the_outcome_changes_the_key(name):
    base = EvalOptions(device="cpu")
    assert api.evaluation_key(TASK, SOL, base.replace(**{name: KEYED[name]}), "cpu") != api.evaluation_key(
        TASK, SOL, base, "cpu"
    )


@pytest.mark.parametrize("name", sorted(UNKEYED))
def test_an_option_that_cannot_change_the_outcome_leaves_the_key(name):
    base = EvalOptions(device="cpu")
    assert api.evaluation_key(TASK, SOL, base.replace(**{name: UNKEYED[name]}), "cpu") == api.evaluation_key(
        TASK, SOL, base, "cpu"
    )


def test_the_text_of_a_stored_verdict_says_it_is_stored_and_a_fresh_one_does_not(tmp_path):
    store = Store(tmp_path / "r.sqlite")
    store.put("k", verdict(ReasonCode.MISMATCH))

    def text(v: Verdict) -> str:
        out = io.StringIO()
        print_verdict(v, Console(file=out, width=200))
        return out.getvalue()

    assert "stored verdict from 2026-12-01T10:00:00+00:00 (--fresh re-runs)" in text(store.get("k"))
    assert "stored verdict" not in text(verdict(ReasonCode.MISMATCH))


def test_a_served_verdict_names_the_paths_asked_for_and_keeps_the_first_as_history(tmp_path):
    db = tmp_path / "r.sqlite"
    opts = EvalOptions(device="cpu", correctness_only=True, db=str(db))
    bob = tmp_path / "bob.py"
    bob.write_bytes(open(SOL, "rb").read())  # byte-identical copy at another path
    assert api.evaluation_key(TASK, str(bob), opts, "cpu") == api.evaluation_key(TASK, SOL, opts, "cpu")
    Store(db).put(api.evaluation_key(TASK, SOL, opts, "cpu"), verdict(ReasonCode.MISMATCH))
    got = api.evaluate(TASK, str(bob), opts)
    assert got.stored is not None and got.codes == ["mismatch"]
    assert got.solution.path == str(bob) and got.task.path == TASK
    assert got.stored.solution_path_then == SOL and got.stored.task_path_then == TASK
    again = from_json(json.loads(got.dumps()))  # the history survives the verdict's JSON
    assert again.stored is not None and again.stored.solution_path_then == SOL
    listed = list(api.evaluate_many([(TASK, str(bob))], opts))
    assert [v.solution.path for v in listed] == [str(bob)]
