"""What a history metric is, in words, and which way is better: the axis labels of the pictures and
the headings of the pages. A ratio's better side comes from its bar (`pass_if`): `ci_lower >= X`
wants it high, `ci_upper <= X` wants it low."""

from __future__ import annotations

import re
from typing import Any

from harness.history.plots import threshold

LOWER, HIGHER = "lower is better", "higher is better"
_TIME = re.compile(r"(^|[._])(ms|us|ns|s|sec|seconds|time|duration)$|_(ms|us|ns|s|seconds)$")
FIXED = {
    "duration_s": ("run time of the criterion (s)", LOWER),
    "build_seconds": ("build time of the matrix entry (s)", LOWER),
    "checks_seconds": ("time of the entry's checks (s)", LOWER),
    "criteria_seconds": ("time of the entry's criteria (s)", LOWER),
    "aa.ratio": ("A/A noise floor: median ratio of a side against itself", "closer to 1 is better"),
    "compare.ratio": ("head/base time ratio (median of the pairs)", LOWER),
    "compare.ci_lower": ("head/base time ratio, lower end of its interval", LOWER),
    "compare.ci_upper": ("head/base time ratio, upper end of its interval", LOWER),
}
AB = {"ratio": "A/B ratio {r} (median of the pairs)", "ci_lower": "A/B ratio {r}, lower end of its interval",
      "ci_upper": "A/B ratio {r}, upper end of its interval"}


def better(metric: str, pass_if: Any = None) -> str:
    """'lower is better', 'higher is better', or '' where neither the metric nor its bar says."""
    if metric in FIXED:
        return FIXED[metric][1]
    if metric in AB:
        bar = threshold(pass_if)
        return "" if bar is None else HIGHER if bar[0] == "ci_lower" else LOWER if bar[0] == "ci_upper" else ""
    field = metric.split(".", 1)[1] if metric.startswith(("a.", "b.")) else metric
    return LOWER if _TIME.search(field) else ""


def label(metric: str, pass_if: Any = None, ratio: Any = None) -> str:
    """'run time of the criterion (s); lower is better': the axis label of a metric's series."""
    if metric in FIXED:
        what = FIXED[metric][0]
    elif metric in AB:
        what = AB[metric].format(r=ratio if isinstance(ratio, str) and ratio else "a/b")
    elif metric.startswith(("a.", "b.")):
        what = f"side {metric[0]}: {metric[2:]} (median of the pairs)"
    else:
        what = metric
    way = better(metric, pass_if)
    return f"{what}; {way}" if way else what


def rate_label(metric: str, rate: float) -> str:
    """The label of N x 1000 / value (`show --rate N`): a time turned into a rate turns which way is better."""
    way = {LOWER: HIGHER, HIGHER: LOWER}.get(better(metric), "")
    return f"{rate:g} x 1000 / {metric}" + (f"; {way}" if way else "")
