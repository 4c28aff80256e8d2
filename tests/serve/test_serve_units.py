"""The service's parts that need no server: task ids, the loopback rule, the token file."""

from __future__ import annotations

import pytest
from serving import ROOT

from kernelproof.errors import UsageError
from kernelproof.serve.config import is_loopback, read_token
from kernelproof.serve.tasks import TaskCatalog


def test_a_task_is_named_by_its_path_under_its_folder_or_by_its_unique_stem():
    catalog = TaskCatalog([ROOT / "suite"])
    gelu = ROOT / "suite" / "level1" / "09_gelu.py"
    assert catalog.find("level1/09_gelu") == gelu and catalog.find("level1/09_gelu.py") == gelu
    assert catalog.find("09_gelu") == gelu
    assert catalog.find("../suite/level1/09_gelu") is None and catalog.find("nope") is None
    assert catalog.holding(gelu.read_text()) == "level1/09_gelu"
    assert catalog.holding(gelu.read_text() + "\n") is None


def test_task_sets_that_name_one_id_twice_or_hold_no_task_are_refused(tmp_path):
    with pytest.raises(UsageError, match="in two --tasks folders"):
        TaskCatalog([ROOT / "suite", ROOT / "suite"])
    with pytest.raises(UsageError, match="no task file"):
        TaskCatalog([tmp_path])
    with pytest.raises(UsageError, match="not a folder"):
        TaskCatalog([tmp_path / "missing"])


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.0.0.2", True),
        ("::1", True),
        ("localhost", True),
        ("0.0.0.0", False),
        ("::", False),
        ("10.1.2.3", False),
        ("example.org", False),
    ],
)
def test_loopback_is_decided_by_the_address(host, loopback):
    assert is_loopback(host) is loopback


def test_a_token_file_must_hold_one_long_word(tmp_path):
    good, short, missing = tmp_path / "good", tmp_path / "short", tmp_path / "missing"
    good.write_text("  a-long-enough-token-0123456789\n")
    short.write_text("short\n")
    assert read_token(good) == "a-long-enough-token-0123456789"
    with pytest.raises(UsageError, match="at least 16"):
        read_token(short)
    with pytest.raises(UsageError, match="cannot read"):
        read_token(missing)
