"""The equivalence band of a certified speedup, derived from the certificate's recorded runs.

A within-run confidence interval describes the noise of one session. A re-run is another session
(clocks, placement, thermal state), so an honest claim checked against a within-run CI alone would
often fail. The band is therefore calibrated from the spread **between** a certificate's
independent runs, with the calibration constants below, which ship with kernelproof.

``verify`` computes the band here, from the runs' own speedup figures, and reads no band
parameter from the certificate: the centre, the spread, the floor and the level are what the runs
and these constants give, whatever the document says (docs/certificates.md states the rule).
"""

from __future__ import annotations

import math
from typing import Any

# Relative session-to-session drift a re-run may show whatever the runs' spread: clock and power
# state move a GPU's throughput by a few percent between sessions (docs/certificates.md).
BAND_FLOOR = 0.03
PREDICTION_LEVEL = 0.95  # two-sided level of the prediction interval for a re-run's speedup
# Student t quantiles t(0.975, df) for df = 1..30 (standard tables); beyond 30 the normal 1.96 is used.
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145,
         2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048,
         2.045, 2.042)  # fmt: skip
# Two centres that differ by less than this (relative) are one number written twice: a claim is
# compared with what its runs give after a round trip through JSON, which keeps floats exact.
SAME_CENTER_REL = 1e-9


def t_quantile(df: int) -> float:
    """t(0.975, df): the two-sided 95 % Student t quantile."""
    if df < 1:
        raise ValueError("df must be at least 1")
    return _T975[df - 1] if df <= len(_T975) else 1.96


def band_halfwidth_log(band: dict[str, Any], reruns: int = 1) -> float:
    """Half-width, in log space, inside which the mean log speedup of ``reruns`` new runs must fall.

    The largest of: the floor; the 95 % prediction interval from the certificate's runs,
    ``t(0.975, n-1) * s * sqrt(1/reruns + 1/n)``; and the widest within-run CI (between-run
    noise is never smaller than within-run noise). ``band`` is one :func:`calibrate_band` made.
    """
    n, s = band["runs"], band["log_sd"]
    predicted = t_quantile(n - 1) * s * math.sqrt(1.0 / reruns + 1.0 / n)
    return max(math.log1p(band["floor"]), predicted, band["within_run_log_halfwidth"])


def calibrate_band(run_speedups: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The band of one baseline from its ``speedup`` entries in every run, or None if any is missing."""
    medians = [s.get("median") if isinstance(s, dict) else None for s in run_speedups]
    if len(medians) < 2 or any(not positive(m) for m in medians):
        return None
    logs = [math.log(m) for m in medians]
    mean = sum(logs) / len(logs)
    sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / (len(logs) - 1))
    within = 0.0
    for s in run_speedups:
        ci = s.get("ci95")
        if isinstance(ci, list) and len(ci) == 2 and positive(ci[0]) and positive(ci[1]):
            within = max(within, (math.log(ci[1]) - math.log(ci[0])) / 2)
    band = {
        "center": math.exp(mean),  # geometric mean of the runs' medians
        "runs": len(logs),
        "log_sd": sd,  # sample standard deviation of log speedups across runs
        "within_run_log_halfwidth": within,
        "floor": BAND_FLOOR,
        "level": PREDICTION_LEVEL,
    }
    band["rel_halfwidth_one_rerun"] = math.expm1(band_halfwidth_log(band, 1))
    return band


def derive_claim(docs: list[dict[str, Any]]) -> dict[str, Any]:
    """What the verdict documents of a certificate's runs support: their verdict and, for a pass,
    one band per baseline every run timed against."""
    outcomes = [str(d.get("verdict")) for d in docs]
    consistent = len(set(outcomes)) == 1
    claim: dict[str, Any] = {
        "verdict": outcomes[0] if consistent else "inconsistent",
        "consistent": consistent,
        "outcomes": outcomes,
        "codes": sorted({str(r.get("code")) for d in docs for r in _reasons(d)}),
        "speedups": {},
    }
    if consistent and outcomes[0] == "pass":
        names = set.intersection(*(set(_speedups(d)) for d in docs))
        for name in sorted(names):
            band = calibrate_band([_speedups(d)[name] for d in docs])
            if band is not None:
                claim["speedups"][name] = band
    return claim


def same_center(a: Any, b: float) -> bool:
    """Whether a claimed centre ``a`` is the centre ``b`` the runs give."""
    return positive(a) and abs(a - b) <= SAME_CENTER_REL * b


def positive(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x > 0


def _reasons(doc: dict[str, Any]) -> list[dict[str, Any]]:
    reasons = doc.get("reasons")
    return [r for r in reasons if isinstance(r, dict)] if isinstance(reasons, list) else []


def _speedups(doc: dict[str, Any]) -> dict[str, Any]:
    speedups = doc.get("speedup")
    return speedups if isinstance(speedups, dict) else {}
