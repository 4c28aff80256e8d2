"""The report, certify and verify verbs as kernelproof.cli registers them, with their exit codes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

import kernelproof.certify
from kernelproof.report.cli import certify_command, report_command, verify_command

DATA = Path(__file__).parent / "data"

app = typer.Typer()
app.command("report")(report_command)
app.command("certify")(certify_command)
app.command("verify")(verify_command)
runner = CliRunner()


def test_report_writes_html_and_markdown_from_json_files(tmp_path, suite_docs):
    files = []
    for i, doc in enumerate(suite_docs):
        files.append(tmp_path / f"v{i}.json")
        files[-1].write_text(json.dumps(doc))
    html, md = tmp_path / "out.html", tmp_path / "out.md"
    result = runner.invoke(app, ["report", *map(str, files), "--html", str(html), "--md", str(md)])
    assert result.exit_code == 0, result.output
    assert "6 verdicts on 4 tasks" in result.output
    assert html.read_text().startswith("<!DOCTYPE html>") and md.read_text().startswith(
        "# kernelproof report"
    )


def test_report_needs_an_output_and_an_input(tmp_path):
    assert runner.invoke(app, ["report", "--html", str(tmp_path / "x.html")]).exit_code == 2
    result = runner.invoke(app, ["report", str(tmp_path)])
    assert result.exit_code == 2 and "--html" in result.output


def test_report_names_an_unreadable_input(tmp_path):
    result = runner.invoke(app, ["report", str(tmp_path / "absent.json"), "--md", str(tmp_path / "o.md")])
    assert result.exit_code == 2 and "absent.json: no such file" in result.output


class _Fake:
    """An evaluator returning real verdicts with the scripted eager speedups."""

    def __init__(self, make_verdict, speedups):
        self.make_verdict, self.speedups, self.calls = make_verdict, speedups, 0

    def __call__(self, task, solution, options):
        s = self.speedups[self.calls % len(self.speedups)]
        self.calls += 1
        return self.make_verdict(str(task), str(solution), speedups={"eager": s})


@pytest.fixture
def pair(tmp_path):
    for name in ("scale_task.py", "scale_solution.py"):
        shutil.copy(DATA / name, tmp_path / name)
    return tmp_path / "scale_task.py", tmp_path / "scale_solution.py"


def test_certify_then_verify_holds_then_fails_with_its_reason(tmp_path, pair, monkeypatch, make_verdict):
    monkeypatch.setattr(kernelproof.certify, "_default_evaluate", lambda: _Fake(make_verdict, [2.0, 2.02]))
    cert = tmp_path / "c.json"
    result = runner.invoke(app, ["certify", *map(str, pair), "--device", "cpu", "-o", str(cert)])
    assert result.exit_code == 0, result.output
    assert "pass in 2 runs" in result.output and "speedup vs eager: 2.01x" in result.output

    monkeypatch.setattr(kernelproof.certify, "_default_evaluate", lambda: _Fake(make_verdict, [2.03]))
    result = runner.invoke(app, ["verify", str(cert), "--json", str(tmp_path / "v.json")])
    assert result.exit_code == 0, result.output
    assert "the result holds" in result.output
    assert json.loads((tmp_path / "v.json").read_text())["holds"] is True

    monkeypatch.setattr(kernelproof.certify, "_default_evaluate", lambda: _Fake(make_verdict, [1.2]))
    result = runner.invoke(app, ["verify", str(cert)])
    assert result.exit_code == 1
    assert "the result does not hold: speedup against" in result.output


def test_certify_rejects_a_single_run_and_verify_a_damaged_certificate(tmp_path, pair):
    result = runner.invoke(app, ["certify", *map(str, pair), "--runs", "1"])
    assert result.exit_code == 2 and "two independent runs" in result.output
    (tmp_path / "bad.json").write_text("{}")
    result = runner.invoke(app, ["verify", str(tmp_path / "bad.json")])
    assert result.exit_code == 2 and "not a kernelproof.certificate/1" in result.output
