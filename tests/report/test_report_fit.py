"""The HTML report as a person reads it: it fits a 1280-pixel screen, shows paths relative to the
suite, draws no roofline without ceilings and no "best" curve that copies the only baseline.

The width is checked twice: by an estimate from the page's own structure that runs everywhere
(each table's narrowest possible layout, at a generous width per character), and in headless
Chromium where it is installed (skipped, saying why, elsewhere; CI installs it: .ci/run).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from html.parser import HTMLParser

import pytest

from kernelproof.report.html import render_html
from kernelproof.report.markdown import render_markdown
from kernelproof.report.scores import summarize
from kernelproof.verdict import Outcome, ReasonCode

SCREEN_PX = 1280
CHAR_PX = 9.0  # generous for 15 px system-ui text (digits are about 8.3 px, code about 8.1 px)
CELL_PAD_PX = 2 * 0.55 * 15 + 1  # padding on both sides and one border
MIN_WRAP_CHARS = 12  # a wrapping column is never read narrower than this
BODY_PX = 1200 + 2 * 15  # the page's max-width and its padding

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None, reason="headless Chromium is not installed (Debian: apt-get install -y chromium)"
)


class _Tables(HTMLParser):
    """Each table's rows as (colspan, text, nowrap, breaks anywhere) cells, as the page's style
    rules say: ``td.num`` on one line, ``td.wrap`` and detail rows broken anywhere."""

    def __init__(self, page: str):
        super().__init__()
        self.tables: list[list[list[tuple[int, str, bool, bool]]]] = []
        self._cell: list | None = None
        self._detail = False
        self.anywhere = (
            re.search(r"td\.wrap, tr\.detail td[^{]*\{ overflow-wrap: anywhere; \}", page) is not None
        )

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        classes = (a.get("class") or "").split()
        if tag == "table":
            self.tables.append([])
        elif tag == "tr" and self.tables:
            self.tables[-1].append([])
            self._detail = "detail" in classes
        elif tag in ("td", "th") and self.tables:
            anywhere = self.anywhere and tag == "td" and ("wrap" in classes or self._detail)
            self._cell = [int(a.get("colspan") or 1), "", "num" in classes, anywhere]
        elif tag in ("li", "br") and self._cell is not None:
            self._cell[1] += "\n"

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self.tables[-1][-1].append(tuple(self._cell))
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell[1] += data


def _min_px(text: str, nowrap: bool, anywhere: bool) -> float:
    """The narrowest a cell can be: all of it on one line (nowrap), else its longest word, which
    wraps after MIN_WRAP_CHARS where the page lets words break anywhere (overflow-wrap)."""
    if nowrap:
        return max(len(line.strip()) for line in text.split("\n")) * CHAR_PX + CELL_PAD_PX
    longest = max((len(w) for w in text.split()), default=0)
    return (min(longest, MIN_WRAP_CHARS) if anywhere else longest) * CHAR_PX + CELL_PAD_PX


def table_min_widths(page: str) -> list[float]:
    """Each table's narrowest layout in pixels: per column the widest of its cells' minimum."""
    parser = _Tables(page)
    parser.feed(page)
    widths = []
    for rows in parser.tables:
        columns: dict[int, float] = {}
        for row in rows:
            col = 0
            for span, text, nowrap, anywhere in row:
                need = _min_px(text, nowrap, anywhere)
                if span == 1:
                    columns[col] = max(columns.get(col, 0.0), need)
                col += span
        widths.append(sum(columns.values()))
    return widths


def _wide_docs(make_verdict, root="/home/someone/projects/kernels/runs/2026-12-01"):
    """Absolute paths, long reasons and flags, three baselines: what pushed the page off the screen."""
    three = {"eager": 1234.5678, "compile:default": 0.000123, "compile:max-autotune-no-cudagraphs": 2.5}
    long = "the output differs from the float64 oracle " * 8 + "/".join(["deeply", "nested"] * 12)
    docs = []
    for i in range(3):
        level = f"level{1 + i // 2}"  # two levels: the suite folder is the one the tasks share
        docs.append(
            make_verdict(
                f"{root}/suite/{level}/{i}_a_task_with_a_rather_long_descriptive_name_for_testing.py",
                f"{root}/solutions/{level}/{i}_a_solution_file_name_that_goes_on_and_on_and_on.py",
                speedups=three,
            ).to_json()
        )
        bad = make_verdict(
            f"{root}/suite/{level}/{i}_a_task_with_a_rather_long_descriptive_name_for_testing.py",
            f"{root}/solutions/{level}/{i}_x.py",
            Outcome.FAIL,
            codes=(ReasonCode.MISMATCH, ReasonCode.LOW_KERNEL_COVERAGE),
            message=f"{long} in {root}/solutions/{level}/{i}_x.py line 3",
        ).to_json()
        bad["flags"] = ["plain_torch_solution_" * 6]
        docs.append(bad)
    return docs


def test_every_table_fits_a_1280_pixel_screen(make_verdict, suite_docs):
    for docs in (suite_docs, _wide_docs(make_verdict)):
        page = render_html(summarize(docs))
        assert re.search(r"max-width: 1200px", page)  # BODY_PX is what the page says
        widths = table_min_widths(page)
        assert widths and max(widths) <= min(BODY_PX, SCREEN_PX), widths


def test_the_width_estimate_catches_a_table_that_cannot_fit():
    cells = "".join(f'<td class="num">{"9.99x [9.99, 9.99]"}</td>' for _ in range(8))
    style = "<style>td.wrap, tr.detail td, h3 { overflow-wrap: anywhere; }</style>"
    assert (
        table_min_widths(f"{style}<table><tr>{cells}</tr></table>")[0] > SCREEN_PX
    )  # figures that may not wrap
    path = "/home/someone/" + "a_long_folder_name/" * 8 + "solution.py"
    assert (
        table_min_widths(f"{style}<table><tr><td>{path}</td></tr></table>")[0] > SCREEN_PX
    )  # a path that cannot
    assert table_min_widths(f'{style}<table><tr><td class="wrap">{path}</td></tr></table>')[0] < 200


def test_paths_are_relative_to_the_suite_and_the_solutions_folders(make_verdict):
    root = "/home/someone/projects/kernels/runs/2026-12-01"
    page = render_html(summarize(_wide_docs(make_verdict, root)))
    assert root not in page and "/home/" not in page
    assert "level1/0_a_task_with_a_rather_long_descriptive_name_for_testing.py" in page
    assert 'data-solution="level1/0_x.py"' in page
    assert "in level1/0_x.py line 3" in page  # the path inside a reason message too
    assert "<code>suite/</code>" in page and "<code>solutions/</code>" in page  # what they are relative to


def test_relative_paths_are_kept_as_given(suite_docs):
    page = render_html(summarize(suite_docs))
    assert 'data-solution="solutions/relu_a.py"' in page and "suite/level1/relu.py" in page
    assert 'id="paths-note"' not in page


def test_no_roofline_is_drawn_without_ceilings(make_verdict):
    docs = [make_verdict(device="cpu").to_json(), make_verdict(device="cpu", flops=3e3).to_json()]
    summary = summarize(docs)
    assert summary.ceilings is None
    page = render_html(summary)
    assert 'id="fig-roofline"' not in page and page.count('src="data:image/png;base64,') == 2
    assert "No roofline: no ceilings are known for cpu" in page


def test_the_roofline_is_drawn_with_ceilings(suite_docs):
    page = render_html(summarize(suite_docs))  # measured on an H200: shipped ceilings match
    assert 'id="fig-roofline"' in page and "No roofline" not in page


def test_best_is_not_shown_beside_a_single_baseline(make_verdict):
    docs = [make_verdict(speedups={"eager": 2.0}).to_json(), make_verdict(speedups={"eager": 0.5}).to_json()]
    assert all("best" in d["speedup"] for d in docs)  # the verdicts carry it, equal to eager
    summary = summarize(docs)
    assert summary.baselines == ("eager",)
    page = render_html(summary)
    assert 'data-baseline="best"' not in page and "vs best baseline" not in page
    assert 'data-baseline="eager"' in page
    assert "vs best" not in render_markdown(summary) and "vs eager" in render_markdown(summary)


def test_best_is_shown_beside_two_baselines(suite_docs):
    page = render_html(summarize(suite_docs))
    assert 'data-baseline="best"' in page and "speedup vs best baseline" in page


def _measured(tmp_path, page: str) -> dict[str, float]:
    """The page laid out by Chromium in a 1280-pixel window: the document's scroll width and the
    right edge of its widest table, read by a script added to a copy of the page (the report itself
    has none)."""
    probe = (
        "<script>window.addEventListener('load', () => {"
        "const right = Math.max(...[...document.querySelectorAll('table')]"
        ".map(t => t.getBoundingClientRect().right));"
        "const p = document.createElement('pre'); p.id = 'measured';"
        "p.textContent = `scroll=${document.documentElement.scrollWidth} right=${right}`;"
        "document.body.appendChild(p);});</script>"
    )
    copy = tmp_path / "measured.html"
    copy.write_text(page.replace("</body>", probe + "</body>"), encoding="utf-8")
    run = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--hide-scrollbars",
         f"--user-data-dir={tmp_path / 'profile'}", f"--window-size={SCREEN_PX},900",
         "--virtual-time-budget=5000", "--dump-dom", copy.as_uri()],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
    found = re.search(r'<pre id="measured">scroll=([\d.]+) right=([\d.]+)</pre>', run.stdout)
    assert found, run.stdout[-2000:]
    return {"scroll": float(found.group(1)), "right": float(found.group(2))}


@needs_chromium
def test_chromium_lays_the_page_out_within_1280_pixels(tmp_path, make_verdict, suite_docs):
    for docs in (suite_docs, _wide_docs(make_verdict)):
        got = _measured(tmp_path, render_html(summarize(docs)))
        assert got["scroll"] <= SCREEN_PX and got["right"] <= SCREEN_PX, got


@needs_chromium
def test_chromium_measure_sees_a_page_wider_than_the_screen(tmp_path):
    wide = (
        "<html><body><table><tr><td style='white-space:nowrap'>"
        + "x" * 400
        + "</td></tr></table></body></html>"
    )
    got = _measured(tmp_path, wide)
    assert got["scroll"] > SCREEN_PX
