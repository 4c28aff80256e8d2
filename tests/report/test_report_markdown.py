"""The Markdown report: tables that paste into READMEs and PRs and cannot be broken by verdict text."""

from __future__ import annotations

from html.parser import HTMLParser

from markdown_it import MarkdownIt

from kernelproof.report.markdown import render_markdown
from kernelproof.report.scores import summarize


def test_has_scores_and_a_leaderboard_per_task(suite_docs):
    md = render_markdown(summarize(suite_docs))
    assert "| `eager` | 3 | 2 | 66.7 % | 66.7 % | 66.7 % | 33.3 % | 33.3 % | 33.3 % | 1.64x |" in md
    assert md.count("### `") == 4
    assert "### `suite/level1/degenerate.py` — degenerate task, not scored" in md
    assert (
        "| 1 | `solutions/relu_a.py` | **pass** |  | 3.00x [2.91, 3.09] | 1.20x [1.16, 1.24] | 40 % | 97 % |"
        in md
    )


def test_cells_cannot_break_the_table_or_inject_markup(suite_docs):
    md = render_markdown(summarize(suite_docs))
    row = next(line for line in md.splitlines() if "relu_c.py" in line)
    assert "`values differ at <script>alert(1)</script> \\| index 3`" in row  # a code span
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


class _Elements(HTMLParser):
    """Start tags, with their attribute names, and the text found outside <code> elements."""

    def __init__(self):
        super().__init__()
        self.tags: list[tuple[str, tuple[str, ...]]] = []
        self.outside_code: list[str] = []
        self._code = 0

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, tuple(name for name, _ in attrs)))
        self._code += tag == "code"

    def handle_endtag(self, tag):
        self._code -= tag == "code"

    def handle_data(self, data):
        if not self._code:
            self.outside_code.append(data)


def _rendered(docs) -> _Elements:
    """The Markdown report rendered as a reader's viewer would, raw HTML allowed, then parsed."""
    page = MarkdownIt("commonmark").enable("table").render(render_markdown(summarize(docs)))
    parsed = _Elements()
    parsed.feed(page)
    return parsed


def test_candidate_text_renders_as_code_only(hostile_docs, benign_docs):
    hostile, benign = _rendered(hostile_docs), _rendered(benign_docs)
    assert hostile.tags == benign.tags  # the same elements: none came from the candidate's text
    assert not {"img", "a", "b", "em"} & {tag for tag, _ in hostile.tags}
    outside = "".join(hostile.outside_code)
    assert "evil.example" not in outside and "gnp.exe" not in outside and "raw" not in outside


def test_a_real_verdict_with_escapes_markup_and_html_renders_none_of_them(real_hostile_doc):
    page = MarkdownIt("commonmark").enable("table").render(render_markdown(summarize([real_hostile_doc])))
    parsed = _Elements()
    parsed.feed(page)
    assert not {"img", "a", "b"} & {tag for tag, _ in parsed.tags}
    assert "evil.example" not in "".join(parsed.outside_code)
    assert "\x1b" not in page and "\u202e" not in page and "\\x1b]0;pwned title\\x07" in page
