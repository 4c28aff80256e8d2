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
