"""Tables for people: 80 columns when piped, paths relative to the suite or the current directory
and never cut; ``results`` titled as what it is, with a solution column, newest first, and its
filters checked."""

from __future__ import annotations

import shutil

from cli_support import DATA, make_verdict, run_piped

from kernelproof.store import Store

TASK = DATA / "tasks" / "scale_relu.py"
LONG = "09_scale_relu_long_name.py"


def _table_lines(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln.strip()]


def test_bench_fits_80_columns_piped_and_shows_paths_relative_to_the_suite(tmp_path):
    for folder in ("suite/level1", "sols/level1"):
        (tmp_path / folder).mkdir(parents=True)
    shutil.copy(TASK, tmp_path / "suite" / "level1" / LONG)
    shutil.copy(TASK, tmp_path / "suite" / "level1" / "unsolved.py")
    shutil.copy(DATA / "solutions" / "wrong_shape.py", tmp_path / "sols" / "level1" / LONG)
    ran = run_piped(
        "bench",
        tmp_path / "suite",
        "--solutions",
        tmp_path / "sols",
        "--device",
        "cpu",
        "--db",
        "",
        "--correctness-only",
        "--seeds-per-case",
        "1",
        columns=80,
    )
    assert ran.code == 1, ran.out + ran.err
    lines = _table_lines(ran.out)
    assert max(len(ln) for ln in lines) <= 80, "\n".join(ln for ln in lines if len(ln) > 80)
    row = lines.index(
        next(ln for ln in lines if ln.startswith(f"level1/{LONG} "))
    )  # whole: not folded, not cut
    assert "fail" in lines[row] and "wrong_shape" in lines[row + 1]
    assert "…" not in ran.out and str(tmp_path / "suite" / "level1") not in ran.out
    assert "no solution for level1/unsolved.py" in ran.out
    assert "kernelproof bench: 1 task of" in ran.out


def _store(tmp_path) -> str:
    db = tmp_path / "r.sqlite"
    store = Store(db)
    older = make_verdict(
        "pass",
        task=str(tmp_path / "suite" / "level1" / "a_first.py"),
        solution=str(tmp_path / "sols" / "level1" / "a_first.py"),
        created_at="2026-12-01T10:00:00+00:00",
    )
    newer = make_verdict(
        "fail",
        ("mismatch",),
        task=str(tmp_path / "suite" / "level2" / "z_then.py"),
        solution=str(tmp_path / "sols" / "level2" / "z_then_solution_written_later.py"),
        created_at="2026-12-02T11:30:00+00:00",
    )
    store.put("k1", older)
    store.put("k2", newer)
    return str(db)


def test_results_is_titled_lists_solutions_newest_first_and_fits_80_columns(tmp_path):
    db = _store(tmp_path)
    ran = run_piped("results", "--db", db, columns=80, cwd=tmp_path)
    assert ran.code == 0, ran.err
    lines = _table_lines(ran.out)
    assert lines[0].startswith("stored verdicts, newest first") and "kernelproof bench" not in ran.out
    assert max(len(ln) for ln in lines) <= 80, ran.out
    header = next(ln for ln in lines if "task" in ln and "solution" in ln)
    assert header.split()[:5] == ["stored", "task", "/", "solution", "verdict"]
    flat = ran.out.replace("\n", " ")
    assert flat.index("2026-12-02") < flat.index("2026-12-01")  # newest first, not by task path
    assert "suite/level2/z_then.py" in ran.out  # relative to the current directory, whole
    assert "sols/level1/a_first.py" in ran.out  # the solution, under its task
    assert str(tmp_path) not in ran.out and "…" not in ran.out
    assert "2 shown of 2 stored" in ran.out


def test_each_run_in_one_process_takes_its_own_width(tmp_path, monkeypatch):
    """The CLI's consoles are made by each run: a later run in the same process (a notebook, these
    tests) is as wide as its own COLUMNS says, not as it was when the module was imported."""
    import importlib
    import sys

    db = _store(tmp_path)
    monkeypatch.setenv("COLUMNS", "60")
    monkeypatch.delitem(sys.modules, "kernelproof.cli", raising=False)
    importlib.import_module("kernelproof.cli")  # imported 60 wide; put back when the test ends
    monkeypatch.delenv("COLUMNS")
    widths = []
    for columns in (60, 200, 60):
        ran = run_piped("results", "--db", db, columns=columns, cwd=tmp_path)
        assert ran.code == 0, ran.err
        widths.append(max(len(ln) for ln in _table_lines(ran.out)))
    assert widths[0] <= 60 and widths[2] <= 60 and widths[1] > 60, widths


def test_results_filters_are_checked(tmp_path):
    db = _store(tmp_path)
    ran = run_piped("results", "--db", db, "--verdict", "bogus")
    assert ran.code == 2 and ran.err.startswith("error: --verdict must be pass | fail | error, not 'bogus'")
    ran = run_piped("results", "--db", db, "--code", "mismatchh")
    assert ran.code == 2 and "--code 'mismatchh' is not a reason code" in ran.err
    ran = run_piped("results", "--db", db, "--verdict", "fail", "--json", "-")
    assert ran.code == 0 and '"mismatch"' in ran.out and "a_first" not in ran.out


def test_paths_are_shown_relative_to_the_suite_however_it_was_given(tmp_path, monkeypatch):
    from kernelproof.console import display_path

    monkeypatch.chdir(tmp_path)
    assert display_path("suite/level1/09_gelu.py", "suite") == "level1/09_gelu.py"
    assert display_path(str(tmp_path / "suite" / "level1" / "a.py"), "suite") == "level1/a.py"
    assert display_path(str(tmp_path / "suite" / "a.py")) == "suite/a.py"  # no suite: the current directory
    assert display_path("/elsewhere/a.py") == "/elsewhere/a.py"  # outside both: as given
    assert display_path("stored/relative.py") == "stored/relative.py"  # relative to where it ran: as given


def test_tables_wrap_within_their_cells_at_80_columns_and_never_break_a_reason_code():
    import io

    from rich.console import Console

    from kernelproof.console import bench_table, results_table

    long_task = "suite/level3/" + "a_task_with_a_very_long_name_" * 3 + ".py"
    verdicts = [
        make_verdict("fail", ("output_aliases_input", "shape_specialized", "mismatch"), task=long_task),
        make_verdict("pass", task="suite/level1/b.py", baselines_ms={"eager": 4.0, "compile:default": 3.0}),
    ]
    for table in (bench_table(verdicts, width=80), results_table(verdicts, width=80)):
        out = io.StringIO()
        Console(file=out, width=80, color_system=None).print(table)
        lines = out.getvalue().splitlines()
        assert max(len(ln) for ln in lines) <= 80, out.getvalue()
        for code in ("output_aliases_input", "shape_specialized", "mismatch"):
            assert any(code in ln for ln in lines), (code, out.getvalue())  # whole, on one line
        assert "…" not in out.getvalue()
