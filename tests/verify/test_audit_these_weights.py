"""A served audit is checked again under the evaluation's own weights.

The audit is kept across evaluations (in this process and in the results store), but whether a
task can tell right from wrong can depend on the weights its evaluation draws:
tests/data/tasks/clamped_offset.py clamps every output to one bound when its drawn offset is
large. An audit made under small-offset weights rejects every control; an evaluation that draws a
large offset, served that audit, would pass a kernel that never reads its input. These run on the
CPU with the small task.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from kernelproof import api
from kernelproof.evaluate import setup as evaluate_setup
from kernelproof.options import EvalOptions
from kernelproof.task import load_task
from kernelproof.verify import audit
from kernelproof.verify.audit_store import AuditStore
from kernelproof.verify.case_plan import build_variant

DATA = Path(__file__).resolve().parents[1] / "data"
TASK = str(DATA / "tasks" / "clamped_offset.py")
IDENTITY = str(DATA / "solutions" / "clamped_offset_identity.py")
IGNORES_X = str(DATA / "solutions" / "clamped_offset_ignores_x.py")
CPU = torch.device("cpu")


def _offset(seed: int) -> float:
    return float(build_variant(load_task(TASK), "default", CPU, "eval", seed).reference.offset.detach())


def _init_seed(sound: bool) -> int:
    """An init seed whose offset leaves outputs inside the clamp (sound) or clamps every one."""
    for seed in range(200):
        off = abs(_offset(seed))
        if (off < 0.3) if sound else (off > 2.0):
            return seed
    raise AssertionError("no such seed in 200")


@pytest.fixture(autouse=True)
def fresh_cache(monkeypatch):
    monkeypatch.setattr(audit, "_CACHE", {})


def test_a_served_audit_is_degenerate_under_weights_that_clamp_every_output(tmp_path):
    task = load_task(TASK)
    sound = build_variant(task, "default", CPU, "eval", _init_seed(sound=True))
    clamped = build_variant(task, "default", CPU, "eval", _init_seed(sound=False))
    store = AuditStore(str(tmp_path / "r.sqlite"))
    first = audit.audit_variant(task, sound, 5, store)
    assert not first.degenerate and not first.these_weights, first.summary()

    served = audit.audit_variant(task, clamped, 6, store)  # from this process's memory
    assert served.degenerate and served.these_weights
    passed = {c.name for c in served.controls if not c.failed_as_it_should}
    assert {"mean", "other_seed"} <= passed, served.summary()
    assert "this evaluation's weights" in served.summary()
    assert {c.name for c in served.controls} == set(audit.WEIGHTS_CONTROLS)

    audit._CACHE.clear()  # a new process: served from the store, checked all the same
    assert audit.audit_variant(task, clamped, 7, store).degenerate
    assert audit.audit_variant(task, sound, 8, store) == first  # sound weights: the stored report


def test_the_check_agrees_with_a_full_audit_under_the_same_weights():
    task = load_task(TASK)
    clamped = build_variant(task, "default", CPU, "eval", _init_seed(sound=False))
    full = audit.audit_variant(task, clamped, 5)  # nothing served: all six controls run
    assert full.degenerate and not full.these_weights
    check = audit.check_these_weights(task, clamped, 5)
    assert check.degenerate and check.these_weights
    full_passed = {c.name for c in full.controls if not c.failed_as_it_should}
    check_passed = {c.name for c in check.controls if not c.failed_as_it_should}
    assert check_passed == full_passed & set(audit.WEIGHTS_CONTROLS)
    sound = build_variant(task, "default", CPU, "eval", _init_seed(sound=True))
    assert not audit.check_these_weights(task, sound, 5).degenerate


def test_a_degenerate_report_is_served_without_a_check(tmp_path, monkeypatch):
    """A parameter the output never reads: the other-weights control passes under every draw. A
    degenerate report is final, and nothing runs again."""
    path = tmp_path / "unused_weight.py"
    path.write_text(
        "import torch\nimport torch.nn as nn\n\n"
        "class Model(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.w = nn.Parameter(torch.randn(8))\n\n"
        "    def forward(self, x):\n"
        "        return torch.tanh(x) * 2 + 1\n\n"
        "def get_inputs():\n    return [torch.randn(4, 8)]\n\n"
        "def get_init_inputs():\n    return []\n"
    )
    task = load_task(str(path))
    # through an evaluation: a second draw passes the reference's controls, its whole audit fails
    # other_weights again, and the task is degenerate (the report kept is the second draw's)
    solution = tmp_path / "unused_weight_solution.py"
    solution.write_text(path.read_text().replace("class Model(", "class ModelNew("))
    refreshed: list[bool] = []
    real = audit.audit_variant

    def spied(*args, **kwargs):
        refreshed.append(kwargs.get("refresh", False))
        return real(*args, **kwargs)

    monkeypatch.setattr(audit, "audit_variant", spied)
    v = api.evaluate(str(path), str(solution), EvalOptions(device="cpu", db=str(tmp_path / "e.sqlite")))
    monkeypatch.setattr(audit, "audit_variant", real)
    assert v.codes == ["degenerate_task"] and "other_weights" in v.reasons[0].message, v.reasons
    assert refreshed[:2] == [False, True], refreshed  # the first draw's audit, then the second's whole
    assert not any(f.startswith("weights drawn again") for f in v.flags)
    audit._CACHE.clear()
    store = AuditStore(str(tmp_path / "r.sqlite"))
    first = audit.audit_variant(task, build_variant(task, "default", CPU, "eval", 1), 5, store)
    assert [c.name for c in first.controls if not c.failed_as_it_should] == ["other_weights"]
    checked: list[str] = []
    monkeypatch.setattr(audit, "check_these_weights", lambda *a, **k: checked.append("ran"))
    audit._CACHE.clear()
    assert audit.audit_variant(task, build_variant(task, "default", CPU, "eval", 2), 6, store) == first
    assert checked == []


def _force_init_seed(monkeypatch, seed: int) -> None:
    """Every context the evaluation's setup builds uses `seed` for its weights."""

    def built(task, variant, device, mode, _init_seed):
        return build_variant(task, variant, device, mode, seed)

    monkeypatch.setattr(evaluate_setup, "build_variant", built)


def test_a_kernel_that_ignores_its_input_does_not_pass_on_a_served_audit(tmp_path, monkeypatch):
    options = EvalOptions(device="cpu", db=str(tmp_path / "r.sqlite"), correctness_only=True, fresh=True)
    _force_init_seed(monkeypatch, _init_seed(sound=True))
    assert api.evaluate(TASK, IDENTITY, options).passed  # the audit is made, and stored
    rejected = api.evaluate(TASK, IGNORES_X, options)  # the same weights: the cases reject it
    assert not rejected.passed and "degenerate_task" not in rejected.codes

    _force_init_seed(monkeypatch, _init_seed(sound=False))  # every draw, the ones drawn again too
    for fresh_process in (False, True):
        if fresh_process:
            audit._CACHE.clear()
        v = api.evaluate(TASK, IGNORES_X, options)
        assert not v.passed and v.codes == ["degenerate_task"], v.reasons
        assert f"each of {evaluate_setup.WEIGHT_DRAWS} draws of the weights" in v.reasons[0].message


def _first_draw_clamped(monkeypatch) -> None:
    """The evaluation's own draw of the weights clamps every output; any draw after it does not."""
    clamped, sound = _init_seed(sound=False), _init_seed(sound=True)
    first: list[int] = []

    def built(task, variant, device, mode, init_seed):
        first[:] = first or [init_seed]
        return build_variant(task, variant, device, mode, clamped if init_seed == first[0] else sound)

    monkeypatch.setattr(evaluate_setup, "build_variant", built)


def test_weights_that_leave_the_task_degenerate_are_drawn_again(tmp_path, monkeypatch):
    options = EvalOptions(device="cpu", db=str(tmp_path / "r.sqlite"), correctness_only=True, fresh=True)
    _force_init_seed(monkeypatch, _init_seed(sound=True))
    assert api.evaluate(TASK, IDENTITY, options).passed  # the audit is made, sound, and stored
    audit._CACHE.clear()

    _first_draw_clamped(monkeypatch)
    cheat = api.evaluate(TASK, IGNORES_X, options)
    assert not cheat.passed and cheat.codes == ["mismatch"], cheat.reasons  # judged under the next draw
    _first_draw_clamped(monkeypatch)
    honest = api.evaluate(TASK, IDENTITY, options)
    assert honest.passed, honest.reasons
    said = [f for f in honest.flags if f.startswith("weights drawn again")]
    assert said and "judged under draw 2" in said[0] and "mean" in said[0], honest.flags


def test_a_task_whose_first_audit_drew_clamping_weights_is_audited_again_under_the_next(
    tmp_path, monkeypatch
):
    """The first audit of the task, under the evaluation's own clamping draw, is degenerate (the
    mean, the other seed and bf16 pass). The weights are drawn again; the draw that passes the
    reference's controls is audited whole, and its sound report replaces the kept one."""
    db = str(tmp_path / "r.sqlite")
    _first_draw_clamped(monkeypatch)
    v = api.evaluate(TASK, IDENTITY, EvalOptions(device="cpu", db=db, correctness_only=True, fresh=True))
    assert v.passed, v.reasons
    said = [f for f in v.flags if f.startswith("weights drawn again")]
    assert said and "bf16_reference" in said[0] and "judged under draw 2" in said[0], v.flags
    task = load_task(TASK)
    kept = AuditStore(db).get(task, build_variant(task, "small", CPU, task.meta.mode, 0))
    assert kept is not None and not kept.degenerate  # the sound audit replaced the degenerate one


def test_a_probed_shape_degenerate_under_every_draw_is_neither_probed_nor_judged(monkeypatch):
    """A probed shape whose audit fails is dropped with a flag; it used to fall into the contract
    and have cases of its own planned on a shape that cannot tell right from wrong."""
    clamped, sound = _init_seed(sound=False), _init_seed(sound=True)

    def built(task, variant, device, mode, _init_seed):
        return build_variant(task, variant, device, mode, clamped if variant.startswith("auto_") else sound)

    monkeypatch.setattr(evaluate_setup, "build_variant", built)
    v = api.evaluate(TASK, IDENTITY, EvalOptions(device="cpu", db="", correctness_only=True))
    assert v.passed, v.reasons
    dropped = [f for f in v.flags if f.startswith("auto shape variant") and "not probed" in f]
    assert dropped, v.flags
    assert v.settings["cases"] and not any(c.startswith("auto_") for c in v.settings["cases"])


def _checked_again(monkeypatch) -> list[int]:
    """Each call of check_these_weights, recorded (and run)."""
    calls: list[int] = []
    real = audit.check_these_weights

    def recorded(task, ctx, seed, task_inputs=None):
        calls.append(seed)
        return real(task, ctx, seed, task_inputs)

    monkeypatch.setattr(audit, "check_these_weights", recorded)
    return calls


WEIGHTLESS = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, slope):
        super().__init__()
        self.slope = slope

    def forward(self, x):
        return torch.nn.functional.leaky_relu(x, self.slope)


def get_inputs():
    return [torch.randn(64, 96)]


def get_init_inputs():
    return [0.01]
"""


def test_a_served_audit_made_under_the_same_weights_is_not_checked_again(monkeypatch, tmp_path):
    """A task whose model draws nothing (no parameters, fixed init arguments, as KernelBench level
    1's elementwise tasks) is built the same by every evaluation: the served report was made under
    these very weights. On an H200 the check cost about 1.1 s of each 6.3 s evaluation of level 1's
    6.4 GB tasks."""
    path = tmp_path / "leaky.py"
    path.write_text(WEIGHTLESS)
    task = load_task(str(path))
    a = build_variant(task, "default", CPU, "eval", 1)
    b = build_variant(task, "default", CPU, "eval", 2)
    calls = _checked_again(monkeypatch)
    store = AuditStore(str(tmp_path / "r.sqlite"))
    first = audit.audit_variant(task, a, 5, store)
    assert first.weights == audit.weights_digest(a) == audit.weights_digest(b) != ""
    assert audit.audit_variant(task, b, 6, store) == first and calls == []
    audit._CACHE.clear()  # from the store: the digest is kept with the report
    assert audit.audit_variant(task, b, 7, store) == first and calls == []


def test_a_served_audit_made_under_other_weights_is_checked_again(monkeypatch):
    task = load_task(TASK)
    sound = build_variant(task, "default", CPU, "eval", _init_seed(sound=True))
    other = build_variant(task, "default", CPU, "eval", _init_seed(sound=True) + 1)
    assert audit.weights_digest(sound) != audit.weights_digest(other)  # a drawn offset
    calls = _checked_again(monkeypatch)
    audit.audit_variant(task, sound, 5)
    audit.audit_variant(task, other, 6)
    assert calls == [6]


def test_a_report_kept_before_the_digest_was_recorded_is_checked_again(monkeypatch):
    task = load_task(TASK)
    ctx = build_variant(task, "default", CPU, "eval", _init_seed(sound=True))
    kept = audit.audit_variant(task, ctx, 5)
    old = audit.AuditReport.from_json({k: v for k, v in kept.to_json().items() if k != "weights"})
    assert old.weights == "" and audit.AuditReport.from_json(kept.to_json()) == kept
    audit._CACHE.clear()
    audit._CACHE[(task.sha256, ctx.variant, ctx.mode, ctx.device.type, ctx.contract_key)] = old
    calls = _checked_again(monkeypatch)
    audit.audit_variant(task, ctx, 6)
    assert calls == [6]


def test_weights_too_large_to_hash_have_no_digest(monkeypatch):
    task = load_task(TASK)
    ctx = build_variant(task, "default", CPU, "eval", 1)
    assert ctx.weight_tensors and audit.weights_digest(ctx) != ""  # the drawn offset
    monkeypatch.setattr(audit, "WEIGHTS_DIGEST_MAX_BYTES", 0)
    assert audit.weights_digest(ctx) == ""
