"""Certificates: independent runs, the derived band, signatures, and verification by re-running."""

from __future__ import annotations

import importlib.util
import json
import math
import re
import shutil
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from kernelproof import signing
from kernelproof.band import BAND_FLOOR, band_halfwidth_log, calibrate_band, t_quantile
from kernelproof.certify import (
    CERT_SCHEMA,
    CertificateError,
    VerifyOptions,
    certify,
    read_certificate,
    verify,
    write_certificate,
)
from kernelproof.code_identity import source_tree_sha256
from kernelproof.options import EvalOptions
from kernelproof.verdict import Outcome, ReasonCode

DATA = Path(__file__).resolve().parents[1] / "report" / "data"
_spec = importlib.util.spec_from_file_location(
    "report_fixtures", Path(__file__).resolve().parents[1] / "report" / "report_fixtures.py"
)
fixtures = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fixtures)


class FakeEvaluator:
    """Returns real verdicts with the scripted eager speedups, one per call; records what it was asked."""

    def __init__(self, speedups, outcome=Outcome.PASS, ci_rel=0.01):
        self.speedups = list(speedups)
        self.outcome = outcome
        self.ci_rel = ci_rel
        self.calls: list[tuple[Path, Path, EvalOptions]] = []

    def __call__(self, task, solution, options):
        self.calls.append((Path(task), Path(solution), options))
        s = self.speedups[(len(self.calls) - 1) % len(self.speedups)]
        outcome = s if isinstance(s, Outcome) else self.outcome
        if outcome is not Outcome.PASS:
            return fixtures.make_verdict(str(task), str(solution), outcome, codes=(ReasonCode.MISMATCH,))
        samples = {"candidate": [0.5, 0.51, 0.49], "eager": [0.5 * s, 0.51 * s]}
        return fixtures.make_verdict(
            str(task), str(solution), speedups={"eager": s}, samples=samples, ci_rel=self.ci_rel
        )


@pytest.fixture
def pair(tmp_path):
    task = tmp_path / "scale_task.py"
    solution = tmp_path / "scale_solution.py"
    shutil.copy(DATA / "scale_task.py", task)
    shutil.copy(DATA / "scale_solution.py", solution)
    return task, solution


KEY = Ed25519PrivateKey.generate()  # the certifier's key, which the verifier trusts in these tests
OTHER = Ed25519PrivateKey.generate()  # someone else's


def signed(cert, key=KEY):
    return signing.sign(cert, key)


def trusting(key=KEY, **kw) -> VerifyOptions:
    return VerifyOptions(trusted={signing.raw_public(key): "the test key"}, **kw)


def check(cert, evaluator, **kw):
    """Verify ``cert`` signed by the trusted key."""
    return verify(signed(cert), trusting(**kw), evaluate=evaluator)


def test_certificate_records_environment_hashes_seeds_settings_and_runs(pair):
    task, solution = pair
    cert = certify(task, solution, EvalOptions(device="cpu"), runs=2, evaluate=FakeEvaluator([2.0, 2.02]))
    assert cert["schema"] == CERT_SCHEMA
    assert len(cert["kernelproof"]["source_sha256"]) == 64
    assert cert["environment"]["python"] and "torch" in cert["environment"]
    assert cert["task"]["sha256"] == fixtures._sha_bytes(task.read_bytes())
    assert cert["solution"]["text"] == solution.read_text()
    assert cert["settings"]["device"] == "cpu" and cert["settings"]["keep_samples"] is True
    assert len(cert["runs"]) == 2 and len(cert["seeds"]) == 2
    run = cert["runs"][0]
    assert run["verdict"]["timing"]["shapes"][0]["samples_ms"]["candidate"] == [0.5, 0.51, 0.49]
    assert run["verdict"]["timing"]["shapes"][0]["clock"]
    assert run["started_at"] and run["finished_at"] and run["wall_s"] >= 0
    json.dumps(cert, allow_nan=False)  # a plain JSON document


def test_source_hash_covers_paths_and_contents_but_not_caches(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "a.py").write_text("x = 1\n")
    before = source_tree_sha256(tmp_path)
    (tmp_path / "pkg" / "__pycache__").mkdir()
    (tmp_path / "pkg" / "__pycache__" / "a.cpython-311.pyc").write_bytes(b"\0")
    assert source_tree_sha256(tmp_path) == before
    (tmp_path / "pkg" / "a.py").write_text("x = 2\n")
    assert source_tree_sha256(tmp_path) != before
    (tmp_path / "pkg" / "a.py").write_text("x = 1\n")
    (tmp_path / "pkg" / "a.py").rename(tmp_path / "pkg" / "b.py")
    assert source_tree_sha256(tmp_path) != before  # same bytes under another name


def test_runs_are_fresh_with_distinct_seeds_and_samples_kept(pair):
    fake = FakeEvaluator([2.0])
    cert = certify(*pair, EvalOptions(device="cpu", seed=7), runs=3, evaluate=fake)
    seeds = [opts.seed for _, _, opts in fake.calls]
    assert len(set(seeds)) == 3 and seeds == cert["seeds"]
    assert all(opts.fresh and opts.keep_samples for _, _, opts in fake.calls)
    again = certify(*pair, EvalOptions(device="cpu", seed=7), runs=3, evaluate=FakeEvaluator([2.0]))
    assert again["seeds"] == seeds  # a given seed makes the runs' seeds reproducible


def test_secret_seeds_when_none_given(pair):
    a = certify(*pair, EvalOptions(device="cpu"), evaluate=FakeEvaluator([2.0]))
    b = certify(*pair, EvalOptions(device="cpu"), evaluate=FakeEvaluator([2.0]))
    assert a["seeds"] != b["seeds"]


def test_needs_at_least_two_runs(pair):
    with pytest.raises(CertificateError, match="two independent runs"):
        certify(*pair, runs=1, evaluate=FakeEvaluator([2.0]))


def test_band_never_narrower_than_the_floor():
    band = calibrate_band([{"median": 2.0, "ci95": [1.99, 2.01]}, {"median": 2.0, "ci95": [1.99, 2.01]}])
    assert band["center"] == pytest.approx(2.0)
    assert band_halfwidth_log(band) == pytest.approx(math.log1p(BAND_FLOOR))


def test_band_grows_with_run_to_run_spread_beyond_the_within_run_ci():
    runs = [{"median": 2.0, "ci95": [1.98, 2.02]}, {"median": 2.1, "ci95": [2.08, 2.12]}]
    band = calibrate_band(runs)
    within = band["within_run_log_halfwidth"]
    half = band_halfwidth_log(band)
    assert half > 5 * within  # the spread between sessions, not one session's CI, sets the band
    s = abs(math.log(2.1) - math.log(2.0)) / math.sqrt(2)
    assert half == pytest.approx(t_quantile(1) * s * math.sqrt(1.5))
    assert band_halfwidth_log(band, reruns=4) < half  # averaging re-runs narrows it


def test_band_at_least_the_widest_within_run_ci():
    band = calibrate_band([{"median": 2.0, "ci95": [1.6, 2.5]}, {"median": 2.0, "ci95": [1.9, 2.1]}])
    assert band_halfwidth_log(band) == pytest.approx((math.log(2.5) - math.log(1.6)) / 2)


def test_t_quantiles_follow_the_standard_table():
    assert t_quantile(1) == pytest.approx(12.706)
    assert t_quantile(2) == pytest.approx(4.303)
    assert t_quantile(1000) == pytest.approx(1.96)


def test_honest_rerun_holds_although_outside_one_runs_ci(pair, tmp_path):
    cert = certify(*pair, EvalOptions(device="cpu"), evaluate=FakeEvaluator([2.0, 2.1], ci_rel=0.01))
    path = write_certificate(signed(cert), tmp_path / "cert.json")
    result = verify(path, trusting(), evaluate=FakeEvaluator([2.2], ci_rel=0.01))  # +7 % over the centre
    assert result.holds, result.reasons
    names = [c.name for c in result.checks]
    assert names == [
        "signature",
        "claim",
        "task_hash",
        "solution_hash",
        "verdict",
        "speedup:best",
        "speedup:eager",
    ]
    assert result.checks[-1].observed == pytest.approx(2.2)


def test_speedup_outside_the_band_does_not_hold_and_says_why(pair):
    cert = certify(*pair, EvalOptions(device="cpu"), evaluate=FakeEvaluator([2.0, 2.01]))
    result = check(cert, FakeEvaluator([1.5]))
    assert not result.holds
    reason = result.reasons[-1]
    assert "speedup against eager" in reason and "re-run 1.5x" in reason and "outside the band" in reason


def test_changed_verdict_does_not_hold(pair):
    cert = certify(*pair, EvalOptions(device="cpu"), evaluate=FakeEvaluator([2.0, 2.0]))
    result = check(cert, FakeEvaluator([Outcome.FAIL]))
    assert not result.holds
    assert "the certificate says pass, the re-run says fail (mismatch)" in result.reasons[0]


def test_failed_claim_verifies_on_verdict_alone(pair):
    fake = FakeEvaluator([Outcome.FAIL])
    cert = certify(*pair, EvalOptions(device="cpu"), evaluate=fake)
    assert cert["claim"]["verdict"] == "fail" and cert["claim"]["speedups"] == {}
    assert check(cert, FakeEvaluator([Outcome.FAIL])).holds


def test_inconsistent_certificate_does_not_verify(pair):
    cert = certify(*pair, EvalOptions(device="cpu"), evaluate=FakeEvaluator([2.0, Outcome.FAIL]))
    assert cert["claim"]["verdict"] == "inconsistent"
    fake = FakeEvaluator([2.0])
    result = check(cert, fake)
    assert not result.holds and "disagree" in result.reasons[0] and fake.calls == []


def test_rerun_uses_the_certified_seeds_and_settings(pair):
    cert = certify(*pair, EvalOptions(device="cpu", baselines=("eager",)), evaluate=FakeEvaluator([2.0]))
    fake = FakeEvaluator([2.0])
    check(cert, fake, reruns=2)
    assert [o.seed for _, _, o in fake.calls] == cert["seeds"]
    assert all(o.device == "cpu" and o.baselines == ("eager",) and o.fresh for _, _, o in fake.calls)
    assert all(o.db == "" and o.keep_samples for _, _, o in fake.calls)  # no store on the verifier's side
    assert "db" not in cert["settings"]  # a path on the certifying machine means nothing elsewhere
    fresh = FakeEvaluator([2.0])
    check(cert, fresh, fresh_seeds=True)
    assert fresh.calls[0][2].seed not in cert["seeds"]


def test_changed_solution_does_not_hold_and_is_not_run(pair, tmp_path):
    cert = certify(*pair, EvalOptions(device="cpu"), evaluate=FakeEvaluator([2.0]))
    other = tmp_path / "other.py"
    other.write_text(pair[1].read_text() + "\n# edited\n")
    fake = FakeEvaluator([2.0])
    result = check(cert, fake, solution=other)
    assert not result.holds and "differs from the certified one" in result.reasons[0] and fake.calls == []


def test_runs_the_embedded_text_never_the_files_at_the_recorded_paths(pair):
    cert = certify(*pair, EvalOptions(device="cpu"), evaluate=FakeEvaluator([2.0]))
    fake = FakeEvaluator([2.0])
    result = check(cert, fake)  # the recorded files are still there, with the certified bytes
    assert result.holds, result.reasons
    task_used, sol_used, _ = fake.calls[0]
    assert task_used.name == "scale_task.py" and sol_used.name == "scale_solution.py"
    assert task_used != pair[0] and sol_used != pair[1]
    assert "rebuilt from the certificate's text" in result.checks[2].message
    for p in pair:
        p.unlink()
    assert check(cert, FakeEvaluator([2.0])).holds


def test_an_odd_recorded_file_name_is_not_used(pair):
    cert = certify(*pair, EvalOptions(device="cpu"), evaluate=FakeEvaluator([2.0]))
    cert["solution"]["path"] = "/etc/../../x/..\x1b]0;t\x07.py"
    fake = FakeEvaluator([2.0])
    assert check(cert, fake).holds
    assert fake.calls[0][1].name == "solution.py"


def test_the_rerun_keeps_no_store_cache_timeout_or_worker_setting_of_the_certificate(pair):
    cert = certify(*pair, EvalOptions(device="cpu"), evaluate=FakeEvaluator([2.0]))
    cert["settings"].update(
        db="/tmp/their.sqlite", build_cache="/tmp/their-cache", timeout_s=1e9, build_workers=64, per_device=8
    )
    fake = FakeEvaluator([2.0])
    assert check(cert, fake).holds
    options = fake.calls[0][2]
    assert options.db == "" and options.fresh and options.keep_samples
    assert options.build_cache and "kernelproof-verify-" in options.build_cache
    assert (options.timeout_s, options.build_workers, options.per_device) == (600.0, 0, 1)
    assert not Path(options.build_cache).exists()  # a temporary directory, removed afterwards


def test_an_edited_claimed_speedup_does_not_hold_and_runs_nothing(pair):
    cert = certify(*pair, EvalOptions(device="cpu"), evaluate=FakeEvaluator([2.0, 2.02]))
    cert["claim"]["speedups"]["eager"]["center"] = 50.0
    fake = FakeEvaluator([50.0])
    result = check(cert, fake)  # even re-signed by the trusted key: the runs do not support 50x
    assert not result.holds and fake.calls == []
    assert "claims 50x against eager; its 2 recorded runs give 2.01x" in result.reasons[0]


def test_a_claimed_verdict_the_runs_do_not_give_does_not_hold(pair):
    cert = certify(*pair, EvalOptions(device="cpu"), evaluate=FakeEvaluator([Outcome.FAIL]))
    cert["claim"]["verdict"] = "pass"
    result = check(cert, FakeEvaluator([Outcome.FAIL]))
    assert not result.holds and "claims pass; its 2 recorded runs give fail" in result.reasons[0]


def test_band_fields_in_the_certificate_are_not_read(pair):
    cert = certify(*pair, EvalOptions(device="cpu"), evaluate=FakeEvaluator([2.0, 2.02]))
    for band in cert["claim"]["speedups"].values():
        band.update(floor=1e9, log_sd=100.0, within_run_log_halfwidth=100.0, runs=2, level=0.999999)
        band["rel_halfwidth_one_rerun"] = 1e9
    result = check(cert, FakeEvaluator([1.2]))  # re-signed: only the band differs
    assert not result.holds
    assert (
        "re-run 1.2x, outside the band" in result.reasons[0]
        and "derived from 2 recorded runs" in result.reasons[0]
    )
    assert any(
        "the band written for eager (1000000000.0) is not the one its runs give" in n for n in result.notes
    )


def test_an_edited_recorded_run_breaks_the_signature_and_runs_nothing(pair):
    cert = signed(certify(*pair, EvalOptions(device="cpu"), evaluate=FakeEvaluator([2.0, 2.02])))
    cert["runs"][0]["verdict"]["speedup"]["eager"]["median"] = 3.0
    fake = FakeEvaluator([2.0])
    result = verify(cert, trusting(), evaluate=fake)
    assert not result.holds and fake.calls == [] and result.signature.state == "invalid"
    assert (
        f"the signature by {signing.fingerprint(signing.raw_public(KEY))} does not hold" in result.reasons[0]
    )


def test_an_unsigned_certificate_is_refused_unless_allowed_and_then_said(pair):
    cert = certify(*pair, EvalOptions(device="cpu"), evaluate=FakeEvaluator([2.0, 2.02]))
    result = verify(cert, trusting(), evaluate=FakeEvaluator([2.0]))
    assert not result.holds and "the certificate is not signed" in result.reasons[0]
    result = verify(cert, trusting(allow_unsigned=True), evaluate=FakeEvaluator([2.0]))
    assert result.holds and result.unsigned_allowed and result.signature.state == "missing"
    assert "checked anyway (--unsigned)" in result.checks[0].message


def test_a_signature_by_another_key_is_reported_and_refused(pair):
    cert = signed(certify(*pair, EvalOptions(device="cpu"), evaluate=FakeEvaluator([2.0])), OTHER)
    result = verify(cert, trusting(), evaluate=FakeEvaluator([2.0]))
    other = signing.fingerprint(signing.raw_public(OTHER))
    assert not result.holds and f"signed by {other}, a key you do not trust" in result.reasons[0]
    assert result.signature.state == "valid" and result.signature.fingerprint == other
    assert verify(cert, trusting(OTHER), evaluate=FakeEvaluator([2.0])).holds


def test_non_finite_numbers_are_written_as_strings_and_still_sign(pair, tmp_path):
    cert = certify(*pair, EvalOptions(device="cpu"), evaluate=FakeEvaluator([2.0]))
    cert["runs"][0]["wall_s"] = math.inf
    cert["environment"]["odd"] = [-math.inf, math.nan]
    path = write_certificate(cert, tmp_path / "c.json", KEY)
    doc = read_certificate(path)
    assert doc["runs"][0]["wall_s"] == "inf" and doc["environment"]["odd"] == ["-inf", "nan"]
    assert verify(doc, trusting(), evaluate=FakeEvaluator([2.0])).holds


def test_a_damaged_certificate_is_misuse_not_a_traceback(pair):
    cert = certify(*pair, EvalOptions(device="cpu"), evaluate=FakeEvaluator([2.0]))
    broken = dict(cert, runs=cert["runs"][:1])
    with pytest.raises(CertificateError, match="runs"):
        verify(signed(broken), trusting(), evaluate=FakeEvaluator([2.0]))
    cert["settings"]["time_budget_s"] = "forever"
    with pytest.raises(CertificateError, match="settings.time_budget_s"):
        check(cert, FakeEvaluator([2.0]))


def test_reads_back_what_it_writes_and_rejects_other_documents(pair, tmp_path):
    cert = certify(*pair, EvalOptions(device="cpu"), evaluate=FakeEvaluator([2.0]))
    path = write_certificate(cert, tmp_path / "c.json")
    assert read_certificate(path) == json.loads(json.dumps(cert))
    (tmp_path / "v.json").write_text(json.dumps({"schema": "kernelproof.verdict/1"}))
    with pytest.raises(CertificateError, match="not a kernelproof.certificate/1"):
        read_certificate(tmp_path / "v.json")


def test_a_rerun_on_another_device_is_noted(pair):
    cert = certify(*pair, EvalOptions(device="cpu"), evaluate=FakeEvaluator([2.0]))
    for run in cert["runs"]:
        run["verdict"]["environment"]["device_name"] = "NVIDIA A100"
    result = check(cert, FakeEvaluator([2.0]))
    assert any("device differs: NVIDIA A100 in the certificate, NVIDIA H200 here" in n for n in result.notes)


def test_verify_result_is_json(pair):
    cert = certify(*pair, EvalOptions(device="cpu"), evaluate=FakeEvaluator([2.0]))
    doc = check(cert, FakeEvaluator([2.0])).to_json()
    assert doc["schema"] == "kernelproof.verify/1" and doc["holds"] is True
    assert doc["signature"]["state"] == "valid" and doc["signature"]["trusted"] is True


def test_an_honest_certificate_verifies_on_the_same_machine(tmp_path):
    """The real commands on the CPU: certify (making the user's key), then verify, exit 0.

    The solution is an honest Triton kernel (on the CPU every counted forward must launch one of
    its own), run by Triton's interpreter. Everything must hold exactly: the signature, the claim
    re-derived from the recorded runs, the rebuilt files and the reproduced verdict. The
    interpreter's speed is not a claim (docs/verdict.md, "What a verdict claims"): the verdicts'
    speedups are withheld, so the certificate claims the verdict and no speedup band. (Bands are
    tested above on synthetic runs.)
    """
    from cli_support import run_piped

    data = Path(__file__).resolve().parents[1] / "data"
    cert = tmp_path / "cert.json"

    def kp(*args):
        return run_piped(*args, columns=400, env={"XDG_CONFIG_HOME": str(tmp_path / "config")})

    made = kp(
        "certify",
        str(data / "tasks" / "scale_relu.py"),
        str(data / "solutions" / "scale_relu_triton.py"),
        "--device",
        "cpu",
        "--time-budget",
        "1",
        "-o",
        str(cert),
    )
    assert made.code == 0, made.out + made.err
    assert "created a signing key" in made.out and "pass in 2 runs" in made.out
    checked = kp("verify", str(cert))
    report = checked.out
    assert checked.code in (0, 1), report + checked.err
    assert "(your key); the signature holds" in report
    for check in (
        "is what its 2 recorded runs give",
        "task rebuilt",
        "solution rebuilt",
        "verdict pass reproduced",
    ):
        assert re.search(r"\[ok\] .*" + re.escape(check), report), report
    assert json.loads(cert.read_text())["claim"]["speedups"] == {}
    assert "speedup against" not in report and "[FAIL]" not in report, report
    assert checked.code == 0 and "the result holds" in report, report


def test_runs_that_ended_as_an_error_are_not_certified(pair, tmp_path):
    """A busy machine's runs claim nothing about the pair: no certificate is signed for them."""
    task, solution = pair

    def busy(task, solution, options):
        return fixtures.make_verdict(
            str(task), str(solution), Outcome.ERROR, codes=(ReasonCode.MACHINE_BUSY,)
        )

    cert = certify(task, solution, EvalOptions(device="cpu", db="", seed=3), runs=2, evaluate=busy)
    out = tmp_path / "busy.cert.json"
    with pytest.raises(CertificateError, match=r"2 of 2 runs ended as an error \(machine_busy"):
        write_certificate(cert, out, KEY)
    assert not out.exists()
