"""Figures for reports: fast_p curves, the speedup distribution, and the device's roofline.

Figures are drawn with matplotlib's object API on the Agg canvas (no pyplot, no global state, no
display) and handed out as PNG data URIs, so an HTML report is one self-contained file.
matplotlib is imported inside the functions: it is the optional ``report`` extra.
"""

from __future__ import annotations

import base64
import io
import math
from collections.abc import Sequence
from typing import Any

from kernelproof.report.scores import Result, fast_p, is_positive, task_best
from kernelproof.text import plot_label

VERDICT_COLOURS = {"pass": "#1b9e4b", "fail": "#d1495b", "error": "#7f7f7f"}
BASELINE_STYLES = ("-", "--", "-.", ":")
DPI = 110  # sharp on ordinary screens, keeps a report of three figures well under a megabyte


def _figure(width_in: float = 7.0, height_in: float = 4.2) -> Any:
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise ImportError(
            'reports need matplotlib: pip install -e ".[report]" (from the kernelproof checkout)'
        ) from err
    fig = Figure(figsize=(width_in, height_in), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def to_data_uri(fig: Any) -> str:
    """The figure as a ``data:image/png;base64,...`` URI."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, metadata={"Software": None})
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


MAX_SPEEDUP_LABELS = 8  # tick labels on a speedup axis: "0.0001x" and its kind are wide


def speedup_ticks(lo: float, hi: float, max_labels: int = MAX_SPEEDUP_LABELS) -> list[float]:
    """Tick positions between ``lo`` and ``hi`` (both > 0) on a log speedup axis: few enough to read.

    Why not matplotlib's LogLocator with subs 1, 2, 5: it puts three ticks in every decade, so a
    run whose speedups span 1e-4x to 10x gets fifteen labels that run into each other. Here a
    range of up to two decades gets 1-2-5 ticks, a wider one a tick per decade, and a range
    wider than ``max_labels`` decades a tick every few decades; never more than ``max_labels``.
    """
    lo, hi = min(lo, hi), max(lo, hi)
    first, last = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    for subs in ((1.0, 2.0, 5.0), (1.0,)):
        ticks = [m * 10.0**e for e in range(first, last + 1) for m in subs]
        ticks = [t for t in ticks if lo * (1 - 1e-9) <= t <= hi * (1 + 1e-9)]
        if len(ticks) <= max_labels:
            return ticks
    step = math.ceil((last - first + 1) / max_labels)
    start = math.ceil(math.log10(lo) - 1e-9)
    # Decades that are multiples of the step, so 1x stays a tick whenever it is in range.
    start += (-start) % step
    return [10.0**e for e in range(start, math.floor(math.log10(hi) + 1e-9) + 1, step)]


def speedup_label(value: float) -> str:
    """``2x``, ``0.5x``, ``0.0001x``, and ``1e-5x`` rather than ``1e-05x``."""
    text = f"{value:g}"
    if "e" in text:
        mantissa, exponent = text.split("e")
        text = f"{mantissa}e{int(exponent)}"
    return text + "x"


def _speedup_axis(ax: Any) -> None:
    """Log x axis labelled 0.5x, 1x, 2x, 5x rather than powers of ten, thinned to stay readable."""
    from matplotlib.ticker import FuncFormatter, Locator, NullFormatter

    class SpeedupLocator(Locator):
        def __call__(self) -> list[float]:
            lo, hi = self.axis.get_view_interval()
            return self.tick_values(lo, hi)

        def tick_values(self, vmin: float, vmax: float) -> list[float]:
            if not (vmin > 0 and vmax > 0 and math.isfinite(vmin) and math.isfinite(vmax)):
                return []
            return speedup_ticks(vmin, vmax)

    ax.set_xscale("log")
    ax.xaxis.set_major_locator(SpeedupLocator())
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: speedup_label(v)))
    ax.xaxis.set_minor_formatter(NullFormatter())


def _message(ax: Any, text: str) -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, color="#555555")
    ax.set_xticks([])
    ax.set_yticks([])


def fast_p_figure(results: Sequence[Result], baselines: Sequence[str]) -> Any:
    """fast_p against p for each baseline: a step function, right-continuous (strict ``>``)."""
    fig = _figure()
    ax = fig.add_subplot()
    drawn = False
    for i, baseline in enumerate(baselines):
        speeds = sorted(s for ok, s in task_best(results, baseline).values() if ok and s is not None)
        if not speeds:
            continue
        lo = min(0.1, speeds[0] / 2)
        ps = [lo, *speeds, max(speeds[-1] * 2, 4.0)]
        ys = [100.0 * (fast_p(results, p, baseline) or 0.0) for p in ps]
        ax.step(
            ps, ys, where="post", linestyle=BASELINE_STYLES[i % 4], linewidth=2, label=plot_label(baseline)
        )
        drawn = True
    if not drawn:
        _message(ax, "no timed passing results")
        return fig
    _speedup_axis(ax)
    ax.axvline(1.0, color="#999999", linewidth=1)
    ax.set_xlabel("speedup threshold p (log scale)")
    ax.set_ylabel("fast_p: tasks correct and faster than p (%)")
    ax.set_ylim(0, 100)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(title="baseline")
    ax.set_title("fast_p")
    return fig


def speedup_histogram_figure(results: Sequence[Result], baselines: Sequence[str]) -> Any:
    """Distribution of the speedups of every passing result, per baseline, on log-spaced bins."""
    from matplotlib.ticker import MaxNLocator

    fig = _figure()
    ax = fig.add_subplot()
    series = {b: [r.speedup(b) for r in results if r.passed and r.speedup(b) is not None] for b in baselines}
    series = {b: v for b, v in series.items() if v}
    if not series:
        _message(ax, "no timed passing results")
        return fig
    values = [v for vs in series.values() for v in vs]
    lo, hi = math.log10(min(values)), math.log10(max(values))
    lo, hi = min(lo, -0.1), max(hi, 0.1)
    edges = [10 ** (lo + (hi - lo) * i / 24) for i in range(25)]
    for i, (baseline, vs) in enumerate(series.items()):
        ax.hist(
            vs,
            bins=edges,
            histtype="step",
            linewidth=2,
            linestyle=BASELINE_STYLES[i % 4],
            label=plot_label(baseline),
        )
    _speedup_axis(ax)
    ax.axvline(1.0, color="#999999", linewidth=1)
    ax.set_xlabel("speedup (log scale; > 1x: faster than the baseline)")
    ax.set_ylabel("passing results")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(title="baseline")
    ax.set_title("Speedup distribution")
    return fig


def roofline_points(results: Sequence[Result]) -> tuple[list[tuple[float, float, Result]], list[Result]]:
    """(arithmetic intensity in FLOP/byte, achieved TFLOP/s, result) for placeable results; the rest."""
    placed, unplaced = [], []
    for r in results:
        if all(is_positive(x) for x in (r.flops, r.min_bytes, r.achieved_tflops)):
            placed.append((r.flops / r.min_bytes, r.achieved_tflops, r))
        else:
            unplaced.append(r)
    return placed, unplaced


def roofline_figure(results: Sequence[Result], ceilings: dict[str, Any] | None) -> Any:
    """The device's roofline (measured ceilings solid, datasheet peaks dashed) with results on it."""
    fig = _figure(7.0, 4.8)
    ax = fig.add_subplot()
    placed, _ = roofline_points(results)
    intensities = [x for x, _, _ in placed]
    x_lo = min([0.05, *[x / 2 for x in intensities]])
    x_hi = max([2000.0, *[x * 2 for x in intensities]])
    xs = [x_lo * (x_hi / x_lo) ** (i / 200) for i in range(201)]
    if ceilings:
        _draw_ceilings(ax, xs, ceilings)
    for verdict, colour in VERDICT_COLOURS.items():
        pts = [(x, y) for x, y, r in placed if r.verdict == verdict]
        if pts:
            xs_, ys_ = [x for x, _ in pts], [y for _, y in pts]
            ax.scatter(
                xs_, ys_, s=36, color=colour, edgecolor="black", linewidth=0.5, zorder=3, label=verdict
            )
    if not placed and not ceilings:
        _message(ax, "no results with FLOP and byte counts, and no ceilings for this device")
        return fig
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP / minimum byte)")
    ax.set_ylabel("achieved TFLOP/s")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize="small", loc="lower right")
    title = "Roofline"
    if ceilings:
        title += f" — {ceilings.get('name', '').upper()} (measured ceilings solid, datasheet dashed)"
    ax.set_title(title, fontsize="medium")
    return fig


def _draw_ceilings(ax: Any, xs: list[float], ceilings: dict[str, Any]) -> None:
    bw = ceilings["copy_bandwidth_TBps"]
    peaks = sorted(ceilings.get("matmul_8192_TFLOPs", {}).items(), key=lambda kv: -kv[1])
    label, last = "", None
    for name, peak in peaks:
        ax.plot(xs, [min(peak, bw * x) for x in xs], linewidth=1.3, color="#3b6ea8", alpha=0.8)
        # Peaks within 15 % of each other share one label so the text stays readable.
        if last is not None and peak > last * 0.85:
            label += f" / {name} {peak:g}"
            continue
        if label:
            ax.text(xs[-1], last, label, va="bottom", ha="right", fontsize="x-small")
        label, last = f"{name} {peak:g}", peak
    if label:
        ax.text(xs[-1], last, label, va="bottom", ha="right", fontsize="x-small")
    ds_bw = ceilings.get("datasheet_bandwidth_TBps")
    ds_peak = max(ceilings.get("datasheet_dense_TFLOPs", {}).values(), default=None)
    if ds_bw and ds_peak:
        ax.plot(xs, [min(ds_peak, ds_bw * x) for x in xs], linestyle="--", color="#999999", linewidth=1)
    ax.plot([], [], color="#3b6ea8", label=f"measured: {bw:g} TB/s, GEMM peaks")
    if ds_bw and ds_peak:
        ax.plot(
            [], [], linestyle="--", color="#999999", label=f"datasheet: {ds_bw:g} TB/s, {ds_peak:g} TFLOP/s"
        )
