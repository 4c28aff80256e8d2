"""The Markdown report: tables that paste into READMEs and PRs and cannot be broken by verdict text."""

from __future__ import annotations

from kernelproof.report.markdown import render_markdown
from kernelproof.report.metrics import summarize


def test_has_scores_and_a_leaderboard_per_task(suite_docs):
    md = render_markdown(summarize(suite_docs))
    assert "| eager | 3 | 2 | 66.7 % | 66.7 % | 66.7 % | 33.3 % | 33.3 % | 33.3 % | 1.64x |" in md
    assert md.count("### `") == 4
    assert "### `suite/level1/degenerate.py` — degenerate task, not scored" in md
    assert (
        "| 1 | `solutions/relu_a.py` | **pass** |  | 3.00x [2.91, 3.09] | 1.20x [1.16, 1.24] | 40 % | 97 % |"
        in md
    )


def test_cells_cannot_break_the_table_or_inject_markup(suite_docs):
    md = render_markdown(summarize(suite_docs))
    row = next(line for line in md.splitlines() if "relu_c.py" in line)
    assert "<script>" not in row and "&lt;script&gt;" in row
    assert row.replace("\\|", "").count("|") == 9  # eight cells; the message's own pipe is escaped


def test_every_table_row_has_as_many_cells_as_its_header(suite_docs):
    md = render_markdown(summarize(suite_docs))
    width = None
    for line in md.splitlines():
        if not line.startswith("|"):
            width = None
            continue
        cells = line.replace("\\|", "").count("|")
        width = width or cells
        assert cells == width, line
