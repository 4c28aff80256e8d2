"""The sizes optimize's prompt states: every shape the evaluator tests a candidate at, with numbers."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelproof.agent.sizes import SizesTested, sizes_tested, sizes_text

DATA = Path(__file__).resolve().parents[1] / "data" / "tasks"
ROW_MEAN = Path(__file__).resolve().parents[1] / "exploits" / "tasks" / "row_mean.py"


def test_the_probed_shapes_are_listed_as_part_of_the_contract_under_auto():
    sizes = sizes_tested(str(ROW_MEAN), "cpu", "auto")
    assert sizes is not None
    assert sizes.own == (("small", (("rows", 4), ("cols", 1024))), ("odd", (("rows", 3), ("cols", 1031))))
    assert dict(sizes.probed) == {
        "auto_odd": (("rows", 3), ("cols", 1023)),
        "auto_half": (("rows", 3), ("cols", 513)),
    }
    text = sizes_text(sizes)
    assert "the task's own: small (rows=4, cols=1024); odd (rows=3, cols=1031)" in text
    assert "probed, part of the contract: auto_odd (rows=3, cols=1023)" in text and "is rejected" in text


def test_on_a_gpu_the_tasks_full_size_shapes_are_listed_too():
    sizes = sizes_tested(str(ROW_MEAN), "cuda", "auto")
    assert sizes is not None and sizes.own[0] == ("default", (("rows", 16), ("cols", 8192)))


def test_derived_constants_show_the_values_they_take_in_each_shape():
    sizes = sizes_tested(str(DATA / "derived_constants.py"), "cpu", "task")
    assert sizes is not None and sizes.own == (("small", (("N", 16), ("M", 8))),)


@pytest.mark.parametrize(
    ("mode", "line"),
    [("probe", "probed once the task's own pass"), ("task", None)],
)
def test_the_text_says_what_a_failure_on_a_probed_shape_means_in_each_mode(mode, line):
    sizes = sizes_tested(str(ROW_MEAN), "cpu", mode)
    assert sizes is not None
    text = sizes_text(sizes)
    if line is None:
        assert sizes.probed == () and "probed" not in text
    else:
        assert line in text and "flagged shape_specialized" in text and "rejected" not in text


def test_a_task_that_does_not_load_gives_no_sizes(tmp_path):
    broken = tmp_path / "broken.py"
    broken.write_text("def oops(:\n")
    assert sizes_tested(str(broken), "cpu", "auto") is None


def test_a_task_without_integer_constants_names_its_shapes_alone():
    assert sizes_text(SizesTested((("default", ()),), (), "task")).endswith("- the task's own: default")
