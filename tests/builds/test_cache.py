"""BuildCache: atomic publication, verified materialisation, refusal of tampered entries."""

from __future__ import annotations

import json
import multiprocessing
import os
import threading
from pathlib import Path

import pytest

from kernelproof.build.cache import BuildCache, CacheTamperError, PublishError

KEY = "ab" * 32
OTHER = "cd" * 32


def _staging(tmp_path: Path, name: str = "staging", payload: bytes = b"\x7fELF fake library") -> Path:
    d = tmp_path / name
    (d / "torch_extensions" / "ext").mkdir(parents=True)
    (d / "torch_extensions" / "ext" / "ext.so").write_bytes(payload)
    (d / "torch_extensions" / "ext" / "main.o").write_bytes(b"object")
    os.utime(d / "torch_extensions" / "ext" / "ext.so", ns=(1_000_000_000, 1_000_000_000))
    return d


def test_publish_then_materialize_restores_files_and_mtimes(tmp_path):
    cache = BuildCache(tmp_path / "cache")
    cache.publish(KEY, _staging(tmp_path), {"backend": "cuda"})
    dest = tmp_path / "worker"
    entry = cache.materialize(KEY, dest)
    so = dest / "torch_extensions" / "ext" / "ext.so"
    assert so.read_bytes() == b"\x7fELF fake library"
    assert so.stat().st_mtime_ns == 1_000_000_000
    assert entry.meta["backend"] == "cuda"
    assert {f.path for f in entry.files} == {"torch_extensions/ext/ext.so", "torch_extensions/ext/main.o"}


def test_lookup_misses_unknown_key(tmp_path):
    assert BuildCache(tmp_path).lookup(KEY) is None
    with pytest.raises(KeyError):
        BuildCache(tmp_path).materialize(KEY, tmp_path / "w")


def test_materialize_refuses_tampered_artifact_and_evicts_entry(tmp_path):
    cache = BuildCache(tmp_path / "cache")
    cache.publish(KEY, _staging(tmp_path))
    planted = tmp_path / "cache" / "entries" / KEY[:2] / KEY / "files" / "torch_extensions" / "ext" / "ext.so"
    planted.write_bytes(b"\x7fELF planted library")
    with pytest.raises(CacheTamperError, match="manifest hash"):
        cache.materialize(KEY, tmp_path / "worker")
    assert cache.lookup(KEY) is None
    assert not (tmp_path / "worker" / "torch_extensions" / "ext" / "ext.so").exists()


def test_materialize_refuses_entry_with_an_extra_file(tmp_path):
    cache = BuildCache(tmp_path / "cache")
    cache.publish(KEY, _staging(tmp_path))
    (tmp_path / "cache" / "entries" / KEY[:2] / KEY / "files" / "sitecustomize.py").write_text("import os")
    with pytest.raises(CacheTamperError, match="file set changed"):
        cache.materialize(KEY, tmp_path / "worker")


def test_materialize_refuses_rewritten_manifest_this_process_published(tmp_path):
    cache = BuildCache(tmp_path / "cache")
    cache.publish(KEY, _staging(tmp_path))
    entry_dir = tmp_path / "cache" / "entries" / KEY[:2] / KEY
    planted = entry_dir / "files" / "torch_extensions" / "ext" / "ext.so"
    planted.write_bytes(b"planted")
    doc = json.loads((entry_dir / "manifest.json").read_text())
    import hashlib

    for f in doc["files"]:
        if f["path"].endswith("ext.so"):
            f["sha256"] = hashlib.sha256(b"planted").hexdigest()
            f["size_bytes"] = 7
    (entry_dir / "manifest.json").write_text(json.dumps(doc))
    with pytest.raises(CacheTamperError, match="manifest"):
        cache.materialize(KEY, tmp_path / "worker")


def test_publish_refuses_links_in_staging(tmp_path):
    staging = _staging(tmp_path)
    (staging / "link").symlink_to("/etc/passwd")
    with pytest.raises(PublishError, match="not a regular file"):
        BuildCache(tmp_path / "cache").publish(KEY, staging)


def test_publish_refuses_oversized_output(tmp_path):
    with pytest.raises(PublishError, match="limit"):
        BuildCache(tmp_path / "cache").publish(KEY, _staging(tmp_path), max_bytes=10)


def test_publish_leaves_out_excluded_paths(tmp_path):
    staging = _staging(tmp_path)
    (staging / "pch").mkdir()
    (staging / "pch" / "kp_torch.h.gch").write_bytes(b"big")
    entry = BuildCache(tmp_path / "cache").publish(KEY, staging, exclude=("pch",))
    assert all(not f.path.startswith("pch") for f in entry.files)


def test_first_publisher_wins_when_threads_race(tmp_path):
    cache = BuildCache(tmp_path / "cache")
    stagings = [_staging(tmp_path, f"s{i}", payload=f"build {i}".encode()) for i in range(8)]
    results = []
    threads = [threading.Thread(target=lambda s=s: results.append(cache.publish(KEY, s))) for s in stagings]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({r.files[0].sha256 for r in results}) == 1
    assert cache.keys() == [KEY]
    cache.materialize(KEY, tmp_path / "worker")  # the winner is intact


def _publish_in_process(root: str, staging: str, out: str) -> None:
    entry = BuildCache(root).publish(KEY, staging)
    Path(out).write_text(entry.files[0].sha256)


def test_first_publisher_wins_when_processes_race(tmp_path):
    ctx = multiprocessing.get_context("spawn")
    stagings = [_staging(tmp_path, f"s{i}", payload=f"build {i}".encode()) for i in range(4)]
    procs = [
        ctx.Process(
            target=_publish_in_process, args=(str(tmp_path / "cache"), str(s), str(tmp_path / f"r{i}"))
        )
        for i, s in enumerate(stagings)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    assert len({(tmp_path / f"r{i}").read_text() for i in range(4)}) == 1
    assert BuildCache(tmp_path / "cache").keys() == [KEY]


def _build_under_lock(root: str, log: str) -> None:
    cache = BuildCache(root)
    with cache.lock(KEY):
        if cache.lookup(KEY) is None:
            with open(log, "a") as f:
                f.write("built\n")
            staging = Path(log).parent / f"st{os.getpid()}"
            (staging / "x").mkdir(parents=True)
            (staging / "x" / "a.so").write_bytes(b"so")
            cache.publish(KEY, staging)


def test_two_builders_of_one_key_build_once(tmp_path):
    ctx = multiprocessing.get_context("spawn")
    log = tmp_path / "log.txt"
    procs = [
        ctx.Process(target=_build_under_lock, args=(str(tmp_path / "cache"), str(log))) for _ in range(3)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert log.read_text() == "built\n"


def test_info_counts_and_clear_removes_entries(tmp_path):
    cache = BuildCache(tmp_path / "cache")
    cache.publish(KEY, _staging(tmp_path, "a"), {"backend": "cuda"})
    cache.publish(OTHER, _staging(tmp_path, "b"), {"backend": "native"})
    info = cache.info()
    assert info["entries"] == 2 and info["backends"] == {"cuda": 1, "native": 1}
    assert info["entry_bytes"] > 0
    assert cache.clear() == 2
    assert cache.keys() == [] and cache.info()["entries"] == 0


def test_rejects_keys_that_are_not_hex(tmp_path):
    with pytest.raises(ValueError):
        BuildCache(tmp_path).lookup("../../etc/passwd")


def test_cache_commands_report_and_clear(tmp_path):
    from cli_support import run_piped

    cache = BuildCache(tmp_path / "cache")
    cache.publish(KEY, _staging(tmp_path), {"backend": "cuda"})
    shown = run_piped("cache", "info", "--root", tmp_path / "cache", "--json")
    assert shown.code == 0 and json.loads(shown.out)["entries"] == 1
    text = run_piped("cache", "info", "--root", tmp_path / "cache")
    assert "entries      1" in text.out and "cuda 1" in text.out
    cleared = run_piped("cache", "clear", "--root", tmp_path / "cache")
    assert cleared.code == 0 and "removed 1 entries" in cleared.out
    assert cache.keys() == []


def test_publish_with_a_selection_copies_only_the_selected_files(tmp_path):
    staging = _staging(tmp_path)
    (staging / "sitecustomize.py").write_text("import os")
    (staging / "link.so").symlink_to(staging / "torch_extensions" / "ext" / "ext.so")
    cache = BuildCache(tmp_path / "cache")
    entry = cache.publish(KEY, staging, select=lambda rel: rel.endswith("ext.so"))
    assert [f.path for f in entry.files] == ["torch_extensions/ext/ext.so"]
    cache.materialize(KEY, tmp_path / "worker")
    assert sorted(p.name for p in (tmp_path / "worker").rglob("*") if p.is_file()) == ["ext.so"]
