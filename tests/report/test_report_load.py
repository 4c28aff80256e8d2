"""Reading verdict documents for reports: files, folders, JSON lines, a store; newest kept."""

from __future__ import annotations

import json

import pytest

from kernelproof.report.load import ReportInputError, deduplicate, load_documents, read_store
from kernelproof.store import Store
from kernelproof.verdict import from_json


def test_reads_single_documents_lists_and_json_lines(tmp_path, suite_docs):
    (tmp_path / "one.json").write_text(json.dumps(suite_docs[0]))
    (tmp_path / "many.json").write_text(json.dumps(suite_docs[1:3]))
    (tmp_path / "lines.jsonl").write_text("\n".join(json.dumps(d) for d in suite_docs[3:]) + "\n")
    docs = load_documents([tmp_path / "one.json", tmp_path / "many.json", tmp_path / "lines.jsonl"])
    assert [d["solution"]["path"] for d in docs] == [d["solution"]["path"] for d in suite_docs]


def test_reads_a_folder_recursively(tmp_path, suite_docs):
    (tmp_path / "sub").mkdir()
    for i, doc in enumerate(suite_docs):
        (tmp_path / ("sub" if i % 2 else ".") / f"v{i}.json").write_text(json.dumps(doc))
    assert len(load_documents([tmp_path])) == len(suite_docs)


def test_rejects_documents_of_another_schema(tmp_path, suite_docs):
    bad = dict(suite_docs[0], schema="kernelproof.verdict/0")
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    with pytest.raises(ReportInputError, match="not a kernelproof.verdict/2 document"):
        load_documents([tmp_path / "bad.json"])


def test_reads_version_1_documents_and_decodes_nonfinite_numbers_only_where_numbers_stand(
    tmp_path, suite_docs
):
    old = dict(suite_docs[0], schema="kernelproof.verdict/1")
    new = dict(suite_docs[1], roofline={**(suite_docs[1]["roofline"] or {}), "sol_fraction": "inf"})
    new["task"] = dict(new["task"], path="nan")
    (tmp_path / "old.json").write_text(json.dumps(old))
    (tmp_path / "new.json").write_text(json.dumps(new))
    first, second = load_documents([tmp_path / "old.json", tmp_path / "new.json"])
    assert first["schema"] == "kernelproof.verdict/1"
    assert second["roofline"]["sol_fraction"] == float("inf") and second["task"]["path"] == "nan"


def test_rejects_missing_paths_and_broken_json(tmp_path):
    with pytest.raises(ReportInputError, match="no such file"):
        load_documents([tmp_path / "absent.json"])
    (tmp_path / "broken.json").write_text("{")
    with pytest.raises(ReportInputError, match="not JSON"):
        load_documents([tmp_path / "broken.json"])


def test_reads_every_verdict_in_the_results_store(tmp_path, suite_docs):
    db = tmp_path / "results.sqlite"
    store = Store(db)
    for i, doc in enumerate(suite_docs):
        store.put(f"key{i}", from_json(doc))
    docs = read_store(db)
    assert sorted(d["solution"]["path"] for d in docs) == sorted(d["solution"]["path"] for d in suite_docs)
    assert len(load_documents([], db=db)) == len(suite_docs)


def test_a_store_that_is_not_a_database_is_misuse(tmp_path):
    db = tmp_path / "other.sqlite"
    db.write_text("not sqlite " * 100)
    with pytest.raises(ReportInputError, match="not a verdict store"):
        read_store(db)
    with pytest.raises(ReportInputError, match="no such store"):
        read_store(tmp_path / "absent.sqlite")


def test_keeps_the_newest_evaluation_of_a_pair_whatever_its_seed(make_verdict):
    old = make_verdict(speedups={"eager": 1.0}, created_at="2026-12-01T10:00:00Z").to_json()
    new = make_verdict(speedups={"eager": 2.0}, created_at="2026-12-02T10:00:00Z").to_json()
    old["settings"]["seed"], new["settings"]["seed"] = 1, 2
    other = make_verdict(solution="solutions/other.py").to_json()
    kept = deduplicate([old, other, new])
    assert [d["solution"]["path"] for d in kept] == [old["solution"]["path"], "solutions/other.py"]
    assert kept[0]["speedup"]["eager"]["median"] == 2.0


def test_one_solution_judged_by_eval_and_by_bench_is_listed_once(make_verdict):
    """bench times 10 s a shape and eval 20 s: budgets and limits do not make two solutions."""
    by_eval = make_verdict(speedups={"eager": 1.9}, created_at="2026-12-01T10:00:00Z").to_json()
    by_bench = make_verdict(speedups={"eager": 2.1}, created_at="2026-12-01T11:00:00Z").to_json()
    by_eval["settings"].update(time_budget_s=20.0, seed=1, cases=["default/normal/0", "default/normal/1"])
    by_bench["settings"].update(time_budget_s=10.0, seed=2, cases=["default/normal/0"])
    (kept,) = deduplicate([by_eval, by_bench])
    assert kept["speedup"]["eager"]["median"] == 2.1  # the newest
    eager_only = make_verdict(speedups={"eager": 2.0}).to_json()
    with_compile = make_verdict(speedups={"eager": 2.0}).to_json()
    with_compile["settings"]["baselines"] = ["compile:default", "eager"]  # another measurement: kept
    assert len(deduplicate([eager_only, with_compile])) == 2
