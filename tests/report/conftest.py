"""Fixtures for report tests: real verdict documents built through kernelproof.verdict."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

_spec = importlib.util.spec_from_file_location(
    "report_fixtures", Path(__file__).parent / "report_fixtures.py"
)
report_fixtures = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(report_fixtures)


@pytest.fixture
def make_verdict():
    return report_fixtures.make_verdict


@pytest.fixture
def suite_docs():
    return report_fixtures.suite_documents()


@pytest.fixture
def hostile_docs():
    return report_fixtures.hostile_documents()


@pytest.fixture
def benign_docs():
    return report_fixtures.benign_documents()


@pytest.fixture(scope="session")
def real_hostile_doc():
    """A real verdict: the CPU pipeline on a solution whose forward raises escapes, markup and HTML."""
    from kernelproof.api import evaluate
    from kernelproof.options import EvalOptions

    data = Path(__file__).parent.parent / "data"
    options = EvalOptions(device="cpu", db="", correctness_only=True, seed=1)
    verdict = evaluate(data / "tasks" / "scale_relu.py", data / "solutions" / "raises_escapes.py", options)
    assert verdict.reasons and "evil.example" in verdict.reasons[0].detail
    return verdict.to_json()
