"""`environment` from the parent's facts, never from the candidate's words (I10, I11).

What this machine lacks is decided by the parent, from its own facts: a build the solution asked
for that the machine cannot do (no CUDA toolkit, a torch without CUDA), or CUDA kernels built for
an evaluation without a CUDA device. A message raised in the candidate's process ("0 active
drivers", "Found no NVIDIA driver", "expects CUDA tensors only"), a comment, or dead code holding a
CUDA source decides nothing: such a solution runs and is judged on merit, a fail, stored. Each
attack sits beside its control, the same file without the lever.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from kernelproof import api, exits
from kernelproof.options import EvalOptions
from kernelproof.store import Store

TESTS = Path(__file__).resolve().parents[1]
GELU = str(TESTS / "legit" / "tasks" / "gelu_tanh.py")
ATTACKS = TESTS / "protocol" / "solutions"


def _options(db: Path) -> EvalOptions:
    return EvalOptions(device="cpu", db=str(db), seed=3, seeds_per_case=1, correctness_only=True)


def _judge(tmp_path: Path, solution: Path, text: str | None = None):
    """The verdict on the CPU and how many rows the store holds after it."""
    if text is not None:
        solution = tmp_path / solution.name
        solution.write_text(text)
    db = tmp_path / f"{solution.stem}.sqlite"
    v = api.evaluate(GELU, str(solution), _options(db))
    return v, Store(str(db)).count()


@pytest.mark.parametrize(
    ("attack", "control_codes"),
    [
        ("driver_words_after_wrong_triton", {"precision_downgrade", "mismatch"}),
        ("no_driver_words_plain_torch", {"precision_downgrade", "mismatch"}),
        ("cuda_only_words_wrong_triton", {"mismatch"}),
    ],
)
def test_words_of_a_missing_driver_or_device_are_the_solutions_runtime_error(tmp_path, attack, control_codes):
    path = ATTACKS / f"{attack}.py"
    v, stored = _judge(tmp_path, path)
    assert v.verdict.value == "fail" and v.codes == ["runtime_error"], v.reasons
    assert exits.of_verdict(v) == 1 and stored == 1  # the solution's failure: kept against it
    (tmp_path / "control").mkdir()
    control, _ = _judge(tmp_path / "control", path, path.read_text().replace("RAISE = True", "RAISE = False"))
    assert control.verdict.value == "fail" and control.codes[0] in control_codes, control.reasons


def test_a_wrong_triton_kernels_driver_words_get_the_parents_note_not_an_excuse(tmp_path):
    v, _ = _judge(tmp_path, ATTACKS / "driver_words_after_wrong_triton.py")
    message = v.reasons[0].message
    assert "0 active drivers" in message  # the solution's words, shown
    assert "ran on 'cpu'" in message and "judged as the solution's" in message  # the parent's note


def test_an_uncalled_load_inline_of_cuda_is_judged_on_merit_and_stored(tmp_path):
    """Dead code holding a CUDA build decides nothing; the same build called at import does."""
    path = ATTACKS / "dead_load_inline_cuda_plain_torch.py"
    v, stored = _judge(tmp_path, path)
    assert v.verdict.value == "fail" and v.codes == ["mismatch"], v.reasons
    assert exits.of_verdict(v) == 1 and stored == 1
    (tmp_path / "control").mkdir()
    called = path.read_text().replace("CALL = False", "CALL = True")
    control, control_stored = _judge(tmp_path / "control", path, called)
    if torch.cuda.is_available():  # a CUDA machine builds it: judged on merit there too
        assert control.verdict.value == "fail", control.reasons
    else:  # truly asked for, and this machine cannot do it: the machine's, never stored
        assert control.codes == ["environment"] and control_stored == 0, control.reasons
        assert "kp_dead_gelu" in control.reasons[0].message  # the call the builder recorded
        assert exits.of_verdict(control) == 2


def test_cuda_words_in_a_comment_or_string_are_judged_on_merit(tmp_path):
    path = ATTACKS / "global_comment_plain_torch.py"
    text = path.read_text()
    assert "__global__ void k(" in text and "cuda_sources=SRC" in text  # the lever is there
    v, stored = _judge(tmp_path, path)
    assert v.verdict.value == "fail" and v.codes == ["mismatch"], v.reasons
    assert exits.of_verdict(v) == 1 and stored == 1
    (tmp_path / "control").mkdir()
    plain = "\n".join(ln for ln in text.splitlines() if "__global__" not in ln and "cuda_sources" not in ln)
    control, _ = _judge(tmp_path / "control", path, plain)
    assert control.codes == ["mismatch"], control.reasons
