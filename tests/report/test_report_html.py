"""The HTML report: self-contained, escaped, and rendered by a real browser (headless Chromium)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from html.parser import HTMLParser

import pytest

from kernelproof.report import build_report
from kernelproof.report.html import render_html
from kernelproof.report.scores import summarize

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--enable-logging=stderr",
    "--v=0",
]
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None, reason="headless Chromium is not installed (Debian: apt-get install -y chromium)"
)


def test_page_is_one_self_contained_file_without_script(suite_docs):
    page = render_html(summarize(suite_docs))
    assert "<script" not in page.replace("&lt;script", "")
    assert not re.search(r'(src|href)="(?!data:)', page)  # nothing fetched from elsewhere
    assert page.count('src="data:image/png;base64,') == 3


def test_untrusted_text_is_escaped(suite_docs):
    page = render_html(summarize(suite_docs))
    assert "<script>alert(1)</script>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_leaderboard_has_one_row_per_result_and_marks_degenerate_tasks(suite_docs):
    page = render_html(summarize(suite_docs))
    assert len(re.findall(r'<tr class="result ', page)) == len(suite_docs)
    assert page.count("degenerate task: not scored") == 1
    assert "3.00x [2.91, 3.09]" in page  # speedup with its CI
    assert 'data-baseline="compile:default"' in page


def _chromium(tmp_path, *args):
    profile = tmp_path / "chromium-profile"
    cmd = [CHROMIUM, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)


def _distinct_colours(png_path) -> tuple[int, float]:
    """(distinct RGB colours, share of pixels that are not white) of a PNG screenshot."""
    import numpy as np
    from matplotlib import image

    pixels = (image.imread(png_path)[..., :3] * 255).round().astype(np.uint32).reshape(-1, 3)
    colours = len(np.unique(pixels[:, 0] << 16 | pixels[:, 1] << 8 | pixels[:, 2]))
    not_white = float((pixels.min(axis=1) < 245).mean())
    return colours, not_white


@needs_chromium
def test_page_loads_in_headless_chromium_with_the_expected_rows(tmp_path, suite_docs):
    page = tmp_path / "report.html"
    build_report(suite_docs, html=page)
    dom = _chromium(tmp_path, "--dump-dom", page.as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert "<h1>kernelproof report</h1>" in dom.stdout
    assert len(re.findall(r'<tr class="result ', dom.stdout)) == len(suite_docs)
    assert len(re.findall(r'<tr class="score" ', dom.stdout)) == 3
    assert len(re.findall(r'<table class="leaderboard"', dom.stdout)) == 4
    assert "Uncaught" not in dom.stderr and "CONSOLE" not in dom.stderr  # no script errors


@needs_chromium
def test_screenshot_of_the_page_is_not_blank(tmp_path, suite_docs):
    page = tmp_path / "report.html"
    shot = tmp_path / "report.png"
    build_report(suite_docs, html=page)
    run = _chromium(tmp_path, f"--screenshot={shot}", "--window-size=1280,2400", page.as_uri())
    assert run.returncode == 0 and shot.is_file(), run.stderr[-2000:]
    colours, not_white = _distinct_colours(shot)
    assert colours > 100  # text, tables, three figures
    assert not_white > 0.05


class _Elements(HTMLParser):
    """Every start tag with its attribute names, as a browser's parser sees them."""

    def __init__(self):
        super().__init__()
        self.tags: list[tuple[str, tuple[str, ...]]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, tuple(name for name, _ in attrs)))


def _elements(docs) -> list[tuple[str, tuple[str, ...]]]:
    parser = _Elements()
    parser.feed(render_html(summarize(docs)))
    return parser.tags


def test_candidate_text_adds_no_element_or_attribute(hostile_docs, benign_docs):
    assert _elements(hostile_docs) == _elements(benign_docs)
    page = render_html(summarize(hostile_docs))
    assert "\x1b" not in page and "\u202e" not in page and "\\u202egnp.exe" in page


def test_a_real_verdict_with_escapes_and_html_adds_no_element(real_hostile_doc):
    plain = json.loads(json.dumps(real_hostile_doc))
    for reason in plain["reasons"]:
        reason["message"] = reason["detail"] = "plain"
    assert _elements([real_hostile_doc]) == _elements([plain])
    assert "\x1b" not in render_html(summarize([real_hostile_doc]))
