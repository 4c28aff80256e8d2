from __future__ import annotations

import io

from agent_fakes import make_verdict, sha, solution
from rich.console import Console

from kernelproof.agent.call_records import Candidate, Rejection
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


def test_lists_every_candidate_with_outcome_codes_and_flags_and_counts_the_rejected():
    flagged = cand(5, "SPEED: 9\n# FLAG: reference_ops_outside_kernels")
    s = summarize([*CANDS, flagged], CALLS, device="CPU (cpu)", device_kind="cpu")
    listed = {c["id"]: c for c in s["candidate_list"]}
    assert [c["id"] for c in s["candidate_list"]] == [f"t00{i}s00" for i in range(6)]
    assert listed["t000s00"]["outcome"] == "fail" and listed["t000s00"]["codes"] == ["mismatch"]
    assert listed["t003s00"]["outcome"] == "not evaluated" and listed["t003s00"]["codes"] == [
        "malformed_answer"
    ]
    assert (
        listed["t005s00"]["flags"] == ["reference_ops_outside_kernels"] and listed["t005s00"]["never_chosen"]
    )
    assert s["rejected"] == 2 and [t["rejected"] for t in s["turns"][:5]] == [1, 0, 0, 1, 0]
    md = render_markdown(s)
    assert "2 rejected" in md and "- device: `CPU (cpu)`" in md
    assert "| t000s00 | refine | fail | mismatch | - |" in md
    assert "| t005s00 | refine | pass (never chosen) | - | reference_ops_outside_kernels |" in md
    assert s["best"]["id"] == "t004s00"


def test_a_cpu_run_has_no_gpu_seconds_column_and_a_gpu_run_keeps_it():
    cpu = summarize(CANDS, CALLS, device="CPU (cpu)", device_kind="cpu")
    md = render_markdown(cpu)
    assert "GPU" not in md and "| eval s |" in md
    console = Console(record=True, width=200, file=io.StringIO())
    console.print(rich_table(cpu))
    shown = console.export_text()
    assert "GPU" not in shown and "eval s" in shown
    gpu = render_markdown(summarize(CANDS, CALLS, device="NVIDIA H200 (cuda)", device_kind="cuda"))
    assert "| GPU s |" in gpu


def test_the_winners_flags_are_named():
    winner = cand(0, "SPEED: 2\n# FLAG: plain_torch")
    md = render_markdown(summarize([winner], [call(0)]))
    assert "- best: t000s00, 2.00x [95% CI 1.94-2.06]; flags: plain_torch" in md


def test_the_turn_table_keeps_each_figure_on_one_line_at_80_columns():
    """At 80 columns a figure once spread over three lines; only the two text columns may wrap."""
    s = summarize(CANDS, CALLS, device="NVIDIA H200 (cuda)", device_kind="cuda", model="openai:gpt-5")
    console = Console(record=True, width=80, file=io.StringIO())
    console.print(rich_table(s))
    lines = console.export_text().splitlines()
    assert max(len(ln) for ln in lines) <= 80
    for t in s["turns"]:
        figures = [str(t["calls"]), str(t["input_tokens"] + t["output_tokens"]), f"{t['dollars']:.4f}"]
        row = next(ln for ln in lines if ln.startswith("│") and ln.split("│")[1].strip() == str(t["turn"]))
        cells = [c.strip() for c in row.split("│")[1:-1]]
        assert all(f in cells for f in figures), (figures, row)
