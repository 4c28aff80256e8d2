"""Figures: fast_p steps, the speedup histogram and the roofline, drawn without a display."""

from __future__ import annotations

import base64

from kernelproof.data import load_ceilings
from kernelproof.report import plots
from kernelproof.report.metrics import results_from


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


def test_a_hostile_baseline_name_is_drawn_as_written_not_as_mathtext(make_verdict):
    from kernelproof.report.plots import fast_p_figure, to_data_uri

    docs = [make_verdict(speedups={"eager": 2.0, "$\\frac{$ \x1b[2K": 1.5}).to_json()]
    figure = fast_p_figure(results_from(docs), ["eager", "$\\frac{$ \x1b[2K"])
    labels = [t.get_text() for t in figure.axes[0].get_legend().get_texts()]
    assert labels == ["eager", "\\$\\frac{\\$ \\x1b[2K"]
    assert to_data_uri(figure).startswith("data:image/png;base64,")  # no mathtext parse error
