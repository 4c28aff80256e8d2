"""Figures: fast_p steps, the speedup histogram and the roofline, drawn without a display."""

from __future__ import annotations

import base64

from kernelproof.data import load_ceilings
from kernelproof.report import plots
from kernelproof.report.scores import results_from


def test_figures_are_png_data_uris(suite_docs):
    results = results_from(suite_docs)
    uri = plots.to_data_uri(plots.fast_p_figure(results, ["eager"]))
    assert uri.startswith("data:image/png;base64,")
    assert base64.b64decode(uri.split(",", 1)[1])[:8] == b"\x89PNG\r\n\x1a\n"


def test_roofline_places_results_with_flop_and_byte_counts(suite_docs, make_verdict):
    results = results_from([*suite_docs, make_verdict(flops=None).to_json()])
    placed, unplaced = plots.roofline_points(results)
    assert len(placed) == 3  # the three passing results; failures and the uncounted one are not
    assert len(unplaced) == len(results) - 3
    x, y, _ = placed[0]
    assert x == 2.0e9 / 4.0e8 and y == 2.0e9 / 0.5e-3 / 1e12


def test_roofline_draws_measured_and_datasheet_ceilings(suite_docs):
    fig = plots.roofline_figure(results_from(suite_docs), load_ceilings("h200"))
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert "measured: 4.28 TB/s, GEMM peaks" in labels
    assert any(label.startswith("datasheet: 4.8 TB/s") for label in labels)


def test_empty_inputs_still_draw_a_labelled_figure():
    for fig in (plots.fast_p_figure([], ["eager"]), plots.speedup_histogram_figure([], ["eager"])):
        assert "no timed passing results" in [t.get_text() for t in fig.axes[0].texts]
    assert plots.to_data_uri(plots.roofline_figure([], None))


def _drawn_speedup_labels(fig):
    """The x tick labels a reader sees (inside the axis' view), with their boxes on the canvas."""
    fig.canvas.draw()
    ax = fig.axes[0]
    lo, hi = sorted(ax.get_xlim())
    ticks = [
        t
        for t in ax.xaxis.get_major_ticks()
        if t.label1.get_visible() and t.label1.get_text() and lo <= t.get_loc() <= hi
    ]
    return [(t.label1.get_text(), t.label1.get_window_extent()) for t in ticks]


def test_speedup_axes_label_a_wide_range_with_few_distinct_labels_that_do_not_overlap(make_verdict):
    speeds = [1e-4, 3e-3, 0.2, 1.5, 10.0]
    docs = [
        make_verdict(task=f"suite/level1/t{i}.py", speedups={"eager": s}).to_json()
        for i, s in enumerate(speeds)
    ]
    results = results_from(docs)
    for figure in (plots.fast_p_figure, plots.speedup_histogram_figure):
        labels = _drawn_speedup_labels(figure(results, ["eager"]))
        texts = [text for text, _ in labels]
        assert 3 <= len(texts) <= plots.MAX_SPEEDUP_LABELS, texts
        assert len(set(texts)) == len(texts) and "1x" in texts and "0.0001x" in texts, texts
        boxes = [box for _, box in labels]
        assert all(a.x1 < b.x0 for a, b in zip(boxes, boxes[1:])), texts  # left to right, apart


def test_speedup_ticks_stay_few_over_any_range():
    assert [plots.speedup_label(t) for t in plots.speedup_ticks(0.5, 4)] == ["0.5x", "1x", "2x"]
    for lo, hi in [(0.9, 1.3), (0.05, 20), (1e-4, 10), (1e-12, 1e3), (1e-20, 1e20)]:
        ticks = plots.speedup_ticks(lo, hi)
        assert 1 <= len(ticks) <= plots.MAX_SPEEDUP_LABELS and all(lo <= t <= hi for t in ticks)
        assert len({plots.speedup_label(t) for t in ticks}) == len(ticks)
    assert 1.0 in plots.speedup_ticks(1e-12, 1e3)  # a thinned axis still marks 1x
    assert plots.speedup_label(1e-5) == "1e-5x"


def test_a_hostile_baseline_name_is_drawn_as_written_not_as_mathtext(make_verdict):
    from kernelproof.report.plots import fast_p_figure, to_data_uri

    docs = [make_verdict(speedups={"eager": 2.0, "$\\frac{$ \x1b[2K": 1.5}).to_json()]
    figure = fast_p_figure(results_from(docs), ["eager", "$\\frac{$ \x1b[2K"])
    labels = [t.get_text() for t in figure.axes[0].get_legend().get_texts()]
    assert labels == ["eager", "\\$\\frac{\\$ \\x1b[2K"]
    assert to_data_uri(figure).startswith("data:image/png;base64,")  # no mathtext parse error
