"""The bytes judged are the bytes stored: the task and the solution are read once (I10).

Attack: a solution file swapped between two reads. The store's key was computed from one read,
the verdict from a second and the worker's copy from a third: a file holding wrong bytes when
the key was computed and the honest solution when it ran had the honest run's pass stored under
the wrong bytes' key, and a later evaluation of the wrong bytes was served that pass. In a shared
store or behind a service, one submitter poisoned everyone's answers. Control: the honest
solution passes, and is judged afresh (never served the wrong bytes' fail).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from kernelproof import api
from kernelproof.errors import StoreError
from kernelproof.options import EvalOptions
from kernelproof.store import Store
from kernelproof.submission import EvaluationKey, Submission, read_submission, submitted_bytes

DATA = Path(__file__).resolve().parents[1] / "data"
TASK = str(DATA / "tasks" / "scale_relu.py")
HONEST = (DATA / "solutions" / "plain_torch.py").read_bytes()
WRONG = HONEST.replace(b"return torch.relu(x) * self.scale + self.bias", b"return x * 0.5")


def _options(db: Path) -> EvalOptions:
    return EvalOptions(device="cpu", db=str(db), seed=3, seeds_per_case=1, correctness_only=True)


def test_a_file_swapped_after_its_key_was_computed_is_judged_as_the_bytes_read(tmp_path, monkeypatch):
    assert WRONG != HONEST
    solution, db = tmp_path / "swapped.py", tmp_path / "r.sqlite"
    solution.write_bytes(WRONG)
    real_served = api.served

    def swap_after_lookup(*args, **kwargs):  # the store was asked: the key is computed by now
        found = real_served(*args, **kwargs)
        solution.write_bytes(HONEST)
        return found

    monkeypatch.setattr(api, "served", swap_after_lookup)
    first = api.evaluate(TASK, str(solution), _options(db))
    monkeypatch.undo()
    # the bytes read when the key was computed are the bytes judged, named and stored
    assert first.solution.sha256 == hashlib.sha256(WRONG).hexdigest(), first.solution
    assert not first.passed and first.codes[0] == "mismatch", first.reasons
    solution.write_bytes(WRONG)
    again = api.evaluate(TASK, str(solution), _options(db))
    assert not again.passed, "the wrong bytes were served a pass they never earned"
    solution.write_bytes(HONEST)
    control = api.evaluate(TASK, str(solution), _options(db))
    assert control.passed and control.stored is None, control.reasons  # judged afresh, then stored
    assert Store(str(db)).count() == 2


def test_the_store_refuses_a_verdict_of_other_bytes_than_its_keys(tmp_path):
    (tmp_path / "sol.py").write_bytes(HONEST)
    options = _options(tmp_path / "r.sqlite")
    verdict = api.evaluate(TASK, str(tmp_path / "sol.py"), options.replace(db=""))
    submission = read_submission(TASK, str(tmp_path / "sol.py"))
    key = api.submission_key(submission, options, "cpu")
    store = Store(str(tmp_path / "r.sqlite"))
    store.put(key, verdict)  # the verdict names the bytes the key was computed from
    other = api.submission_key(Submission(submission.task, submitted_bytes("sol.py", WRONG)), options, "cpu")
    assert isinstance(other, EvaluationKey) and other.solution_sha256 != key.solution_sha256
    with pytest.raises(StoreError, match="another evaluation's key"):
        store.put(other, verdict)
    assert store.count() == 1


def test_a_submission_of_bytes_is_judged_without_reading_its_paths(tmp_path):
    """A service submits bytes: the names need not exist, and the verdict names the bytes given."""
    task = submitted_bytes(str(tmp_path / "nowhere" / "task.py"), Path(TASK).read_bytes())
    for data, passed in ((HONEST, True), (WRONG, False)):
        solution = submitted_bytes(str(tmp_path / "nowhere" / "sol.py"), data)
        v = api.evaluate_submission(Submission(task, solution), _options(tmp_path / "r.db"))
        assert v.passed is passed and v.solution.sha256 == solution.sha256, v.reasons
        assert v.task.path == task.path and v.task.sha256 == task.sha256
