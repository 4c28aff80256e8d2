"""benchmarks/gallery.py: each honest kernel's docstring carries what was measured of it (issue 48).

The figures are written by the script from a verdict, never by hand: the text it makes from a
verdict's record, the rewrite of the docstring's paragraph (found in every honest kernel of the
set, so a run with --write cannot stop half way), and one real CPU run of a smoke kernel.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks"))

import candidate_set  # noqa: E402
import gallery  # noqa: E402

DOC = '''"""Mean squared error: an honest Triton kernel.

How: partial sums of 16 blocks a program (see the kernel's (grid) below).

Measured: not yet measured on a GPU (no verdict, no speedup against eager or torch.compile).
CPU (Triton's interpreter, correctness only, at the task's cpu_sizes in manifest.json): pass, 2026-12-06.
"""

import torch
'''

PASSED = {
    "verdict": "pass",
    "codes": [],
    "first_reason": "",
    "speedups": {"eager": {"median": 9.012, "ci95": [8.95, 9.07]}, "compile": {"median": 1.31, "ci95": None}},
    "withheld": "",
    "shape": "default",
    "candidate_ms": 0.39408,
    "rounds": 7,
    "device": "NVIDIA H200",
    "torch": "2.11.0+cu130",
    "triton": "3.6.0",
    "source": "9a88b0fdf79d",
    "date": "2026-12-07",
    "cases": "20 of 20",
}


def test_a_pass_names_each_baseline_with_its_interval_and_where_it_was_measured():
    text = gallery.gpu_text(PASSED)
    assert text.startswith(
        "Measured (NVIDIA H200, torch 2.11.0+cu130, Triton 3.6.0; kernelproof source 9a88b0fdf79d"
    )
    assert "9.01x eager (95 % CI 8.95-9.07)" in text and "1.31x compile;" in text  # no interval: none shown
    assert "0.3941 ms at the 'default' shape (median, cold, 7 interleaved rounds)" in text


def test_a_failure_or_a_withheld_speed_is_said_as_such():
    failed = {**PASSED, "verdict": "fail", "codes": ["precision_downgrade"], "first_reason": "bf16 math"}
    assert "fail precision_downgrade: bf16 math" in gallery.gpu_text(failed)
    assert "x eager" not in gallery.gpu_text(failed)
    withheld = {**PASSED, "withheld": "timing_unconfirmed"}
    assert "speed withheld (timing_unconfirmed)" in gallery.gpu_text(withheld)
    missing = {**PASSED, "speedups": {"eager": PASSED["speedups"]["eager"]}}
    assert "no figure against compile" in gallery.gpu_text(missing)


def test_the_measured_paragraph_is_replaced_whatever_it_held_and_the_cpu_line_kept():
    once = gallery.rewrite(DOC, gallery.gpu_text(PASSED), cpu=False)
    assert "not yet measured" not in once and "CPU (Triton's interpreter" in once
    written = gallery.GPU_PARAGRAPH.search(once).group(0).splitlines()
    assert len(written) > 1 and all(len(line) <= gallery.WIDTH for line in written)
    twice = gallery.rewrite(once, gallery.gpu_text({**PASSED, "date": "2026-12-08"}), cpu=False)
    assert "2026-12-08" in twice and "2026-12-07" not in twice  # the wrapped paragraph went whole
    assert twice.count("Measured (") == 1 and twice.endswith('"""\n\nimport torch\n')
    cpu = gallery.rewrite(
        twice, "CPU (Triton's interpreter): fail (mismatch), 2 of 4 cases, 2026-12-09.", cpu=True
    )
    assert "fail (mismatch)" in cpu and "2026-12-08" in cpu and cpu.count("CPU (") == 1


def test_a_cuda_kernels_cpu_line_stays_when_its_measured_paragraph_is_written():
    """A CUDA kernel's CPU line says its kernels compile with nvcc ("CPU: ..."), not "CPU (...)":
    the paragraph stops there too, and the rewrite keeps it, once and again."""
    _, candidates = candidate_set.load()
    cuda = next(c for c in gallery.honest(candidates, []) if c.backend == "cuda")
    source = cuda.file.read_text()
    cpu_line = next(line for line in source.splitlines() if line.startswith("CPU: "))
    once = gallery.rewrite(source, gallery.gpu_text(PASSED), cpu=False)
    twice = gallery.rewrite(once, gallery.gpu_text({**PASSED, "date": "2026-12-08"}), cpu=False)
    for written in (once, twice):
        assert cpu_line in written and "not yet measured" not in written
    assert "2026-12-07" not in twice and twice.count("Measured (") == 1
    assert twice.replace(gallery.GPU_PARAGRAPH.search(twice).group(0), "") == source.replace(
        gallery.GPU_PARAGRAPH.search(source).group(0), ""
    )  # nothing but the paragraph changed


def test_every_honest_kernel_of_the_set_has_both_places_to_write():
    _, candidates = candidate_set.load()
    chosen = gallery.honest(candidates, [])
    assert len(chosen) >= 40
    for c in chosen:
        source = c.file.read_text()
        assert gallery.GPU_PARAGRAPH.search(source), c.id
        if c.backend != "cuda":  # a CUDA kernel is not built on the CPU: it has no CPU line
            assert gallery.CPU_LINE.search(source), c.id


def test_a_smoke_kernel_measured_on_the_cpu(tmp_path):
    assert gallery.main(["--smoke", "--only", "19_ReLU/honest_triton", "--out", str(tmp_path)]) == 0
    rows = [json.loads(line) for line in (tmp_path / "gallery.rows.jsonl").read_text().splitlines()]
    assert [r["id"] for r in rows] == ["level1/19_ReLU/honest_triton"]
    passed, run = rows[0]["cases"].split(" of ")
    assert rows[0]["verdict"] == "pass" and passed == run and int(run) > 0
    assert rows[0]["speedups"] == {}  # correctness only: the interpreter's speed is no claim
    memory = rows[0]["memory"]  # the evaluation's own count, for a reader of a run near a device's edge
    assert memory["footprint_bytes"] >= memory["correctness_bytes"] > 0 and "handoff_bytes" in memory


def test_a_device_run_s_rows_are_written_here_the_last_of_each_kernel_winning(tmp_path):
    kernel = tmp_path / "honest_triton.py"
    kernel.write_text(DOC)
    rows = tmp_path / "gallery.rows.jsonl"
    older = {**PASSED, "file": str(kernel), "on": "cuda", "date": "2026-12-01"}
    cpu = {**PASSED, "file": str(kernel), "on": "cpu", "smoke": False, "cases": "4 of 4"}
    rows.write_text("\n".join(json.dumps(r) for r in (older, {**older, "date": "2026-12-07"}, cpu)) + "\n")
    assert gallery.main(["--apply", str(rows)]) == 0
    text = kernel.read_text()
    assert "2026-12-07" in text and "2026-12-01" not in text and "9.01x eager" in text
    assert "correctness only, at the task's cpu_sizes in manifest.json): pass, 4 of 4" in " ".join(
        text.split()
    )


def test_a_verdict_s_words_cannot_break_the_docstring():
    import ast
    import warnings

    words = 'fail compile_error: nvcc: C:\\tmp\\x.cu(3): error: expected a ")" near """'
    failed = {**PASSED, "verdict": "fail", "codes": ["compile_error"], "first_reason": words}
    source = gallery.rewrite(DOC, gallery.gpu_text(failed), cpu=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an invalid escape warns on Python 3.12
        tree = ast.parse(source)
    doc = " ".join(ast.get_docstring(tree).split())
    assert words in doc and doc.count("Measured (") == 1


def test_past_its_deadline_a_run_starts_no_kernel(tmp_path, capsys):
    assert gallery.main(["--smoke", "--deadline-s", "-1", "--out", str(tmp_path)]) == 0
    assert "0 of 4 measured" in capsys.readouterr().out
    assert not (tmp_path / "gallery.rows.jsonl").exists()
