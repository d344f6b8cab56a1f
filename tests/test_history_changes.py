"""Change points (E-divisive means, signal-processing-algorithms): a planted 5 % step in a noisy
series of 40 values is found, a flat series gives none, over seeded repetitions. Every draw is
seeded: the rates are the same on every run. `python tests/test_history_changes.py` prints the
rates of docs/HISTORY.md (100 repetitions at 1, 2 and 3 % noise)."""

from __future__ import annotations

import shlex
import subprocess

import numpy as np
import pytest

from harness.history import changes

pytest.importorskip("signal_processing_algorithms")  # the plots extra; .[dev] and CI install it

N_POINTS, STEP = 40, 0.05


def planted(seed: int, sigma: float, step: float) -> tuple[list[float], int]:
    """40 values around 1000 with relative Gaussian noise sigma; from a seeded position in [10, 30]
    on, the level is (1 + step) times higher."""
    rng = np.random.default_rng(seed)
    at = int(rng.integers(10, 31))
    values = 1000 * (1 + sigma * rng.standard_normal(N_POINTS))
    values[at:] *= 1 + step
    return list(values), at


def rates(reps: int, sigma: float) -> tuple[float, float, float]:
    """(step found, step found within 2 values of where it is, flat series fires) over reps seeds."""
    commits = [f"c{i:02d}" for i in range(N_POINTS)]
    found = near = fired = 0
    for seed in range(reps):
        values, at = planted(seed, sigma, STEP)
        cs = changes.find(values, commits)
        found += bool(cs)
        near += any(abs(c.index - at) <= 2 for c in cs)
        flat, _ = planted(10_000 + seed, sigma, 0.0)
        fired += bool(changes.find(flat, commits))
    return found / reps, near / reps, fired / reps


def test_a_planted_five_percent_step_is_found_and_a_flat_series_is_left_alone():
    found, near, fired = rates(40, 0.02)
    assert found >= 0.95 and near >= 0.9, (found, near)
    assert fired <= 0.05, fired


def test_a_change_names_its_commits_size_significance_and_bisect_command():
    values = [100.0] * 10 + [110.0] * 10
    values = [v + d for v, d in zip(values, np.random.default_rng(3).normal(0, 0.5, 20), strict=True)]
    commits = [f"{i:02d}aaaaaaaaaaaaaaaaaaaa" for i in range(20)]
    (c,) = changes.find(values, commits)
    assert (c.index, c.before, c.after) == (10, commits[9], commits[10])
    assert c.size == pytest.approx(0.10, abs=0.01)
    assert c.pvalue < 0.01
    assert c.hint_text("CMP1", "compare.ratio") == "pin it: kite-harness bisect 09aaaaaaaa 10aaaaaaaa --workload CMP1"
    assert c.hint_text("E8b", "ratio") == "the commits to check: git log --oneline --end-of-options 09aaaaaaaa..10aaaaaaaa --"
    assert c.commit_range() == "09aaaaaaaa..10aaaaaaaa"
    text = changes.describe(c, "E8b", "ratio")
    assert "+10." in text and "p < 0.005" in text and "git log --oneline --end-of-options 09aaaaaaaa..10aaaaaaaa" in text


def test_a_crafted_name_cannot_make_the_printed_command_run_shell_code(tmp_path):
    """A series id from a report goes into the printed command as one quoted word; a commit that is
    no hash gives no command (N04)."""
    c = changes.Change(6, "05aaaaaaaa", "06aaaaaaaa", 1.0, 1.1, 0.005)
    marker = tmp_path / "ran"
    crafted = f"W1; touch {marker}; echo $(touch {marker})"
    line = c.hint_text(crafted, "compare.ratio")
    cmd = line.split(": ", 1)[1]
    assert shlex.split(cmd) == ["kite-harness", "bisect", "05aaaaaaaa", "06aaaaaaaa", "--workload", crafted]
    subprocess.run(["sh", "-c", "kite_harness() { :; }; " + cmd.replace("kite-harness", "kite_harness", 1)],
                   check=True)  # pasted into a shell, with the harness stubbed out
    assert not marker.exists()
    assert shlex.split(c.hint_text("-x", "compare.ratio").split(": ", 1)[1])[-1] == "--workload=-x"
    bad = changes.Change(6, "05aa; touch x", "06aaaaaaaa", 1.0, 1.1, 0.005)
    assert bad.hint("W1", "compare.ratio") is None and "no command" in bad.hint_text("W1", "compare.ratio")


def test_the_same_series_gives_the_same_answer_and_leaves_numpy_alone():
    values, _ = planted(5, 0.02, STEP)
    commits = [str(i) for i in range(N_POINTS)]
    np.random.seed(123)
    before = np.random.get_state()[1].copy()
    first = changes.find(values, commits)
    assert (np.random.get_state()[1] == before).all()
    assert changes.find(values, commits) == first


def test_short_series_and_bad_input():
    assert changes.find([1.0, 2.0, 3.0], ["a", "b", "c"]) == []
    with pytest.raises(ValueError, match="one commit per value"):
        changes.find([1.0] * 8, ["a"])


if __name__ == "__main__":
    for sigma in (0.01, 0.02, 0.03):
        f, n, x = rates(100, sigma)
        print(f"noise {sigma * 100:g} %: 5 % step found {f * 100:.0f} %, within 2 values {n * 100:.0f} %, "
              f"flat series fires {x * 100:.0f} %")
