"""The report, certify, verify and keys verbs of the command line, with their exit codes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from cli_support import run_piped

import kernelproof.api
import kernelproof.certify

DATA = Path(__file__).parent / "data"


def test_report_writes_html_and_markdown_from_json_files(tmp_path, suite_docs):
    files = []
    for i, doc in enumerate(suite_docs):
        files.append(tmp_path / f"v{i}.json")
        files[-1].write_text(json.dumps(doc))
    html, md = tmp_path / "out.html", tmp_path / "out.md"
    result = run_piped("report", *map(str, files), "--html", str(html), "--md", str(md))
    assert result.code == 0, result.output
    assert "6 verdicts on 4 tasks" in result.output
    assert html.read_text().startswith("<!DOCTYPE html>") and md.read_text().startswith(
        "# kernelproof report"
    )


def test_report_needs_an_output_and_an_input(tmp_path, monkeypatch):
    # without inputs it reads the default store, as every verb does: here one that does not exist
    monkeypatch.setenv("KERNELPROOF_DB", str(tmp_path / "never-written.sqlite"))
    assert run_piped("report", "--html", str(tmp_path / "x.html")).code == 2
    result = run_piped("report", str(tmp_path))
    assert result.code == 2 and "--html" in result.output


def test_report_names_an_unreadable_input(tmp_path):
    result = run_piped("report", str(tmp_path / "absent.json"), "--md", str(tmp_path / "o.md"))
    assert result.code == 2 and "absent.json: no such file" in result.output


class _Fake:
    """An evaluator returning real verdicts with the scripted eager speedups."""

    def __init__(self, make_verdict, speedups):
        self.make_verdict, self.speedups, self.calls = make_verdict, speedups, 0

    def __call__(self, task, solution, options):
        s = self.speedups[self.calls % len(self.speedups)]
        self.calls += 1
        return self.make_verdict(str(task), str(solution), speedups={"eager": s})


@pytest.fixture
def pair(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))  # the user's key goes here
    for name in ("scale_task.py", "scale_solution.py"):
        shutil.copy(DATA / name, tmp_path / name)
    return tmp_path / "scale_task.py", tmp_path / "scale_solution.py"


def test_certify_then_verify_holds_then_fails_with_its_reason(tmp_path, pair, monkeypatch, make_verdict):
    monkeypatch.setattr(kernelproof.api, "evaluate", _Fake(make_verdict, [2.0, 2.02]))
    cert = tmp_path / "c.json"
    result = run_piped("certify", *map(str, pair), "--device", "cpu", "-o", str(cert))
    assert result.code == 0, result.output
    assert "pass in 2 runs" in result.output and "speedup vs eager: 2.01x" in result.output
    assert "created a signing key: " in result.output and "signed by sha256:" in result.output
    result = run_piped("certify", *map(str, pair), "--device", "cpu", "-o", str(cert))
    assert result.code == 0 and "created a signing key" not in result.output  # made once

    monkeypatch.setattr(kernelproof.api, "evaluate", _Fake(make_verdict, [2.03]))
    result = run_piped("verify", str(cert), "--json", str(tmp_path / "v.json"))
    assert result.code == 0, result.output
    assert "the result holds" in result.output and "(your key); the signature holds" in result.output
    assert json.loads((tmp_path / "v.json").read_text())["holds"] is True

    monkeypatch.setattr(kernelproof.api, "evaluate", _Fake(make_verdict, [1.2]))
    result = run_piped("verify", str(cert))
    assert result.code == 1
    assert "the result does not hold: speedup against" in result.output


def test_certify_shows_a_runs_long_reason_whole_within_80_columns(tmp_path, pair, monkeypatch, make_verdict):
    from kernelproof.verdict import Outcome, ReasonCode

    busy = "the machine is too busy to time: " + "2.5 other tasks were runnable; " * 12 + "run it again"

    def evaluate(task, solution, options):
        return make_verdict(
            str(task), str(solution), Outcome.ERROR, codes=(ReasonCode.MACHINE_BUSY,), message=busy
        )

    monkeypatch.setattr(kernelproof.api, "evaluate", evaluate)
    result = run_piped("certify", *map(str, pair), "--device", "cpu", "-o", str(tmp_path / "c"))
    assert result.code == 2, result.output
    runs = result.output[result.output.index("  run with seed") :]
    assert "machine_busy: the machine is too busy" in runs and "run it again" in " ".join(runs.split())
    assert "more characters" not in runs and max(map(len, runs.splitlines())) <= 80, runs


def test_certify_rejects_a_single_run_and_verify_a_damaged_certificate(tmp_path, pair):
    result = run_piped("certify", *map(str, pair), "--runs", "1")
    assert result.code == 2 and "two independent runs" in result.output
    (tmp_path / "bad.json").write_text("{}")
    result = run_piped("verify", str(tmp_path / "bad.json"))
    assert result.code == 2 and "not a kernelproof.certificate/1" in result.output


def test_keys_creates_a_key_once_and_shows_its_public_half(tmp_path):
    path = tmp_path / "keys" / "mine.pem"
    first = run_piped("keys", "--path", str(path))
    assert first.code == 0, first.output
    assert f"created a signing key: {path}" in first.output and oct(path.stat().st_mode & 0o777) == "0o600"
    assert "ssh-ed25519 " in first.output and str(tmp_path / "keys" / "mine.pub") in first.output
    second = run_piped("keys", "--path", str(path))
    assert second.code == 0 and "created" not in second.output
    fingerprint = [line for line in first.output.splitlines() if line.startswith("fingerprint: sha256:")]
    assert fingerprint and fingerprint[0] in second.output


def test_keys_refuses_a_key_others_can_read(tmp_path):
    path = tmp_path / "k.pem"
    assert run_piped("keys", "--path", str(path)).code == 0
    path.chmod(0o640)
    result = run_piped("keys", "--path", str(path))
    assert result.code == 2 and "chmod 600" in result.output


def _certificate(tmp_path, pair, monkeypatch, make_verdict, *extra) -> Path:
    monkeypatch.setattr(kernelproof.api, "evaluate", _Fake(make_verdict, [2.0, 2.02]))
    cert = tmp_path / "c.json"
    result = run_piped("certify", *map(str, pair), "--device", "cpu", "-o", str(cert), *extra)
    assert result.code == 0, result.output
    monkeypatch.setattr(kernelproof.api, "evaluate", _Fake(make_verdict, [2.01]))
    return cert


def _edit(cert: Path, change) -> None:
    doc = json.loads(cert.read_text())
    change(doc)
    cert.write_text(json.dumps(doc))


def _resign(cert: Path, key_path: Path) -> None:
    """Sign the edited document again with the user's own key: only the signature is then honest."""
    from kernelproof import signing
    from kernelproof.certify import read_certificate, write_certificate

    write_certificate(read_certificate(cert), cert, signing.load_private_key(key_path))


def test_verify_exits_1_on_an_edited_claimed_speedup(tmp_path, pair, monkeypatch, make_verdict):
    cert = _certificate(tmp_path, pair, monkeypatch, make_verdict)
    _edit(cert, lambda d: d["claim"]["speedups"]["eager"].update(center=50.0))
    result = run_piped("verify", str(cert))
    assert result.code == 1 and "the signature by sha256:" in result.output  # altered
    _resign(cert, tmp_path / "config" / "kernelproof" / "signing-key.pem")
    result = run_piped("verify", str(cert))
    assert result.code == 1, result.output
    assert "claims 50x against eager; its 2 recorded runs give 2.01x" in result.output


def test_verify_exits_1_on_edited_band_fields_which_it_does_not_read(
    tmp_path, pair, monkeypatch, make_verdict
):
    cert = _certificate(tmp_path, pair, monkeypatch, make_verdict)
    wide = dict(floor=1e9, log_sd=50.0, within_run_log_halfwidth=50.0, rel_halfwidth_one_rerun=1e9)
    _edit(cert, lambda d: [b.update(wide) for b in d["claim"]["speedups"].values()])
    _resign(cert, tmp_path / "config" / "kernelproof" / "signing-key.pem")
    monkeypatch.setattr(kernelproof.api, "evaluate", _Fake(make_verdict, [0.5]))
    result = run_piped("verify", str(cert))
    assert result.code == 1, result.output
    assert "re-run 0.5x, outside the band" in result.output and "the derived band is used" in result.output


def test_verify_exits_1_on_an_edited_recorded_run(tmp_path, pair, monkeypatch, make_verdict):
    cert = _certificate(tmp_path, pair, monkeypatch, make_verdict)
    _edit(cert, lambda d: d["runs"][1]["verdict"]["speedup"]["eager"].update(median=50.0))
    result = run_piped("verify", str(cert))
    assert result.code == 1
    assert "does not hold: the certificate was changed after it was signed" in result.output


def test_verify_exits_1_without_a_signature_unless_unsigned_which_it_states(
    tmp_path, pair, monkeypatch, make_verdict
):
    cert = _certificate(tmp_path, pair, monkeypatch, make_verdict)
    _edit(cert, lambda d: d.pop("signature"))
    result = run_piped("verify", str(cert))
    assert result.code == 1 and "the certificate is not signed" in result.output
    result = run_piped("verify", str(cert), "--unsigned")
    assert result.code == 0, result.output
    assert "checked anyway (--unsigned)" in result.output
    assert "--unsigned: no trusted signature was required" in result.output


def test_verify_reports_and_refuses_another_keys_signature_until_trusted(
    tmp_path, pair, monkeypatch, make_verdict
):
    theirs = tmp_path / "theirs" / "key.pem"
    cert = _certificate(tmp_path, pair, monkeypatch, make_verdict, "--key", str(theirs))
    from kernelproof import signing

    fingerprint = signing.fingerprint(signing.raw_public(signing.load_private_key(theirs)))
    result = run_piped("verify", str(cert))
    assert result.code == 1
    assert f"signed by {fingerprint}, a key you do not trust" in result.output
    result = run_piped("verify", str(cert), "--trust", str(theirs.with_suffix(".pub")))
    assert result.code == 0, result.output
    assert f"signed by {fingerprint} (trusted through" in result.output


def test_verify_prints_a_hostile_certificate_inertly(tmp_path, pair, monkeypatch, make_verdict):
    cert = _certificate(tmp_path, pair, monkeypatch, make_verdict)
    hostile = {"device_name": "\x1b]0;t\x07[bold]x"}
    _edit(cert, lambda d: [run["verdict"]["environment"].update(hostile) for run in d["runs"]])
    result = run_piped("verify", str(cert), "--unsigned")
    assert "\x1b" not in result.output and "\\x1b]0;t\\x07[bold]x" in result.output


def test_an_output_in_a_folder_that_does_not_exist_is_refused_before_anything_runs(tmp_path, pair):
    nowhere = tmp_path / "no-such-folder"
    for args in (
        ["report", str(DATA), "--html", str(nowhere / "r.html")],
        ["report", str(DATA), "--md", str(nowhere / "r.md")],
        ["certify", *map(str, pair), "-o", str(nowhere / "c.json")],
        ["verify", str(tmp_path / "c.json"), "--json", str(nowhere / "v.json")],
    ):
        result = run_piped(*args)
        assert result.code == 2, (args, result.output)
        assert f"the folder {nowhere} does not exist" in result.output, result.output
