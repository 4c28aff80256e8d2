"""Reports over verdict documents: a self-contained HTML page and a Markdown version.

Reports read ``kernelproof.verdict/2`` (and ``/1``) documents only (from JSON files or a store)
and write leaderboards per task, fast_p, the speedup distribution and the device's roofline.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kernelproof.report.load import ReportInputError, load_documents, read_store
from kernelproof.report.scores import Summary, fast_p, geomean_speedup, results_from, summarize

__all__ = [
    "ReportInputError",
    "Summary",
    "build_report",
    "fast_p",
    "geomean_speedup",
    "load_documents",
    "read_store",
    "results_from",
    "summarize",
]


def build_report(
    docs: list[dict[str, Any]],
    html: str | Path | None = None,
    md: str | Path | None = None,
    title: str = "kernelproof report",
    ceilings: dict[str, Any] | None = None,
) -> Summary:
    """Summarize ``docs`` and write the HTML and/or Markdown report; returns the summary."""
    summary = summarize(docs, title=title, ceilings=ceilings)
    if html is not None:
        from kernelproof.report.html import write_html

        write_html(summary, html)
    if md is not None:
        from kernelproof.report.markdown import write_markdown

        write_markdown(summary, md)
    return summary
