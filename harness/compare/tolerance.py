"""Bytes that may change by design: a workload registered with `bytes: {within: {nmse: 1e-10}}`
(also max_ulp, max_abs) compares its dumps against the bounds, not byte for byte. The one rule
for a compare's bytes: the verdict of each kind of workload, and which verdicts fail it."""

from __future__ import annotations

from typing import Any

from harness.run.dumpdiff import DumpDiff

SAME, CHANGED, WITHIN, BEYOND = "same", "changed", "within", "beyond"
BAD = (CHANGED, BEYOND)  # bytes that make a bisect step bad (a "may-change" workload is not bisected by bytes)


def bounds(within: tuple[tuple[str, float], ...]) -> dict[str, Any]:
    """compare_bytes' keyword arguments for the registered bounds."""
    return {k: (int(x) if k == "max_ulp" else x) for k, x in within}


def verdict(rule: str, diffs: list[DumpDiff]) -> str:
    """same when every dump is identical; else changed, or for a tolerance: within when every
    differing dump is inside the bounds, beyond when one is not."""
    if all(d.identical for d in diffs):
        return SAME
    if rule != WITHIN:
        return CHANGED
    return WITHIN if all(d.ok for d in diffs) else BEYOND


def failed(rule: str, got: str) -> bool:
    """A compare fails on bytes that must stay the same and changed, or that went beyond their bounds."""
    return (rule == "same" and got == CHANGED) or got == BEYOND
