from __future__ import annotations

from agent_fakes import make_verdict, sha, solution

from kernelproof.agent.records import Candidate, Rejection
from kernelproof.agent.summary import plot, render_markdown, rich_table, summarize
from kernelproof.text import markdown_text


def cand(turn: int, marker: str, **kw) -> Candidate:
    src = solution(marker, str(turn))
    v = make_verdict(src, f"{turn}.py")
    fields = dict(verdict=v, gpu_s=v.elapsed_s)
    fields.update(kw)
    return Candidate(f"t{turn:03d}s00", turn, 0, "refine", (), "", "", f"{turn}.py", src, sha(src), **fields)


def call(turn: int, kind: str = "refine", tokens: int = 100, failed: bool = False) -> dict:
    return dict(
        turn=turn,
        kind=kind,
        response=None if failed else "x",
        input_tokens=tokens,
        output_tokens=10,
        cost_usd=0.001,
        latency_s=2.0,
        attempts=1,
    )


CANDS = [
    cand(0, "WRONG\n# GPU_S: 2"),
    cand(1, "SPEED: 1.5\n# GPU_S: 3"),
    cand(2, "SPEED: 1.2"),
    cand(3, "x", verdict=None, rejection=Rejection("malformed_answer", "No code.")),
    cand(4, "SPEED: 2.0"),
]
CALLS = [call(0, "draft"), call(1), call(2), call(3), call(4), call(5, failed=True)]


def test_progress_tracks_the_best_lower_bound_over_evaluated_candidates():
    s = summarize(CANDS, CALLS)
    assert [p["n"] for p in s["progress"]] == [1, 2, 3, 4]  # the malformed answer was not evaluated
    assert [p["best_low"] for p in s["progress"]] == [None, 1.5 * 0.97, 1.5 * 0.97, 2.0 * 0.97]
    assert (
        s["best"]["id"] == "t004s00"
        and s["verified"] == 3
        and s["rejected_before_eval"] == {"malformed_answer": 1}
    )


def test_says_where_tokens_and_gpu_time_went():
    s = summarize(CANDS, CALLS)
    assert s["tokens_by_kind"]["refine"]["calls"] == 5 and s["tokens_by_kind"]["draft"]["input"] == 100
    assert s["gpu_seconds_by_outcome"] == {"mismatch": 2.0, "pass": 5.0}
    turn5 = s["turns"][-1]
    assert turn5["failed_calls"] == 1 and turn5["candidates"] == 0


def test_renders_markdown_a_terminal_table_and_a_figure(tmp_path):
    s = summarize(
        CANDS,
        CALLS,
        run_id="r",
        task="scale_add",
        model="openai:m",
        strategy="refine",
        stop_reason="max_candidates",
        price=None,
    )
    md = render_markdown(s)
    assert "- best: t004s00, 2.00x [95% CI 1.94-2.06]" in md
    assert "| 1 | refine | 1 | 100 | 10 |" in md and "| mismatch | 2.0 |" in md
    assert rich_table(s).row_count == 6
    png = plot(s, tmp_path / "s.png")
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_an_exceeded_budget_is_explained_by_its_real_cause():
    why = "the reply to call t000s00 reported 40000 output tokens, over the cap of 16384 sent with it"
    s = summarize(
        CANDS,
        CALLS,
        stop_reason="reply_over_cap",
        stop_detail=why,
        budgets_held=False,
        budgets_exceeded=[{"limit": "max_dollars", "spent": 0.8123, "allowed": 0.5}],
        warnings=[why],
        overrun_causes=[why],
        price=[1.0, 20.0],
    )
    md = render_markdown(s)
    said = markdown_text(why, limit=2000)  # prose from outside is Markdown-escaped
    assert f"- stopped: reply_over_cap ({said})" in md
    assert "- **a budget was exceeded**: max_dollars: $0.8123 spent, over the limit of $0.5000" in md
    assert f"  - why: {said}" in md and f"## Warnings\n\n- {said}" in md
    assert "GPU seconds" not in md.split("|")[0]


def test_budgets_that_held_say_nothing_about_exceeding():
    md = render_markdown(summarize(CANDS, CALLS, stop_reason="max_candidates", budgets_held=True))
    assert "exceeded" not in md and "Warnings" not in md


def test_a_hostile_task_name_stays_inert_in_markdown_and_the_terminal():
    from markdown_it import MarkdownIt
    from rich.console import Console

    name = "x![i](http://e/i.png)<b>[bold]\x1b]0;t\x07"
    s = summarize(CANDS, CALLS, run_id="r", task=name, model="m", strategy="refine", stop_reason="done")
    page = MarkdownIt("commonmark").enable("table").render(render_markdown(s))
    assert "<img" not in page and "<b>" not in page and "\x1b" not in page
    assert "<h1>kernelproof optimize: <code>x![i](http://e/i.png)&lt;b&gt;[bold]\\x1b]0;t\\x07</code>" in page
    console = Console(record=True, width=200, force_terminal=True)
    console.print(rich_table(s))
    title = console.export_text().splitlines()[0]
    assert "[bold]\\x1b]0;t\\x07: refine with m" in title
