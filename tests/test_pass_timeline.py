"""bench/pass_timeline.py: the per-op shares of a step from the CUDA module's timeline file, on
synthetic steps whose shares are known, and its clear errors on a malformed file."""

from __future__ import annotations

import importlib.util
import statistics
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
NO_WAIT = 2**64 - 1


def _timeline():
    spec = importlib.util.spec_from_file_location("pass_timeline", REPO / "bench" / "pass_timeline.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["pass_timeline"] = mod
    spec.loader.exec_module(mod)
    return mod


def _step(step: int, t0: int, gemv_after_wait: int = 1200) -> list[str]:
    """embed 0-1000 ns (no wait), actq starts at 500, waits at 1500 and ends 2500, gemv starts at
    1800, waits at 2800 and ends 2800 + gemv_after_wait; a piece event (op 3) has no line, the LM
    head gemv is op 4 (it starts 200 ns before the gemv ends)."""
    end = 2800 + gemv_after_wait
    rows = [
        (0, "embed", 1, 1, 1, 256, 0, 0, 0, NO_WAIT, 1000),
        (1, "actq", 4, 1, 1, 256, 0, 0, 500, 1500, 2500),
        (2, "gemv", 224, 1, 1, 256, 1, 4, 1800, 2800, end),
        (4, "gemv", 1940, 1, 1, 256, 1, 4, end - 200, end + 300, end + 2300),
    ]
    return [
        f"{step} {i} {k} {x} {y} {z} {th} {mt} {rpw} {t0 + s} {w if w == NO_WAIT else t0 + w} {t0 + e}"
        for i, k, x, y, z, th, mt, rpw, s, w, e in rows
    ]


def test_shares_add_up_to_the_step_and_group_by_kind_and_blocks():
    pt = _timeline()
    # two warm-up steps with other times, then two steps with the gemv's tail 1200 and 1400 ns
    lines = _step(0, 0, 9000) + _step(1, 10**6, 9000) + _step(2, 2 * 10**6, 1200) + _step(3, 3 * 10**6, 1400)
    ops = pt.parse(lines)
    kept = {s: v for s, v in pt.by_step(ops).items() if s >= 2}
    rows = {r.group: r for r in pt.groups(pt.shares(kept))}
    assert set(rows) == {"actq (4 blocks)", "gemv <1, 4> (224 blocks)", "gemv <1, 4> (1940 blocks)"}
    actq = rows["actq (4 blocks)"]
    assert (actq.ops, actq.total, actq.ahead, actq.to_wait, actq.after_wait) == (1, 1.5, 0.5, 0.5, 1.0)
    gemv = rows["gemv <1, 4> (224 blocks)"]
    assert gemv.total == pytest.approx(1.6)  # median of 1.5 and 1.7 us
    assert gemv.to_wait == pytest.approx(0.3) and gemv.after_wait == pytest.approx(1.3)
    assert gemv.ahead == pytest.approx(0.7)  # its first block ran 0.7 us before the actq ended
    head = rows["gemv <1, 4> (1940 blocks)"]
    assert head.total == pytest.approx(2.3) and head.to_wait == pytest.approx(0.3)
    assert head.ahead == pytest.approx(0.2)
    # the shares add up to the span less the first op's own time (its start to its end)
    spans = pt.spans(kept)
    assert spans == [pytest.approx(6.3), pytest.approx(6.5)]
    assert sum(r.total for r in rows.values()) == pytest.approx(statistics.median(spans) - 1.0)


def test_report_and_cli(tmp_path, capsys):
    pt = _timeline()
    f = tmp_path / "steps.txt"
    f.write_text("\n".join(_step(0, 0) + _step(1, 10**6) + _step(2, 2 * 10**6)) + "\n")
    assert pt.main([str(f), "--skip", "1", "--ops"]) == 0
    out = capsys.readouterr().out
    assert "Steps: 2 (first 1 of 3 left out)" in out
    assert "| actq (4 blocks) | 1 | 1.5 | 1.50 | 0.50 | 0.50 | 1.00 |" in out
    assert "| 4 | gemv <1, 4> (1940 blocks) | 2.30 | 0.20 | 0.30 | 2.00 |" in out


def test_an_op_that_never_waited_shows_no_wait_times():
    pt = _timeline()
    lines = [line for line in _step(0, 0) if " actq " not in line]
    lines.append(f"0 1 actq 4 1 1 256 0 0 500 {NO_WAIT} 2500")
    text = pt.report(pt.parse(lines), 0, False)
    assert "| actq (4 blocks) | 1 | 1.5 | 1.50 | 0.50 | - | - |" in text


@pytest.mark.parametrize(
    "content, message",
    [
        ("0 1 actq 4 1 1 256 0 0 500 1500\n", "line 1: 11 fields, 12 expected"),
        ("0 1 actq 4 1 1 256 0 0 500 x 2500\n", "line 1: invalid literal"),
    ],
)
def test_a_malformed_file_is_a_clear_error(tmp_path, capsys, content, message):
    f = tmp_path / "bad.txt"
    f.write_text(content)
    assert _timeline().main([str(f)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"pass_timeline: {f}: ") and message in err


def test_skipping_every_step_and_a_missing_file_are_errors(tmp_path, capsys):
    pt = _timeline()
    f = tmp_path / "steps.txt"
    f.write_text("\n".join(_step(0, 0)) + "\n")
    assert pt.main([str(f)]) == 2
    assert "1 steps in the file, all left out by --skip 4" in capsys.readouterr().err
    assert pt.main([str(tmp_path / "none.txt")]) == 2
    assert "none.txt" in capsys.readouterr().err


# one op a microsecond: embed, a DeltaNet layer (7 ops), an attention layer (9 ops), the LM head
KINDS = (["embed"] + ["actq", "gemv", "deltanet_head", "gemv", "actq", "gemv_glu", "gemv"]
         + ["actq", "gemv", "qkprep", "scores", "values", "gemv", "actq", "gemv_glu", "gemv"] + ["actq", "gemv"])


def _layer_step(step: int) -> list[str]:
    t0 = step * 10**6
    return [f"{step} {i} {k} 4 1 1 256 1 1 {t0 + 1000 * i - 500} {t0 + 1000 * i - 200} {t0 + 1000 * i + 1000}"
            for i, k in enumerate(KINDS)]


def test_layers_split_by_kind_and_sum_their_ops():
    pt = _timeline()
    lines = [ln for s in range(2) for ln in _layer_step(s)]
    out = pt.report(pt.parse(lines), 0, False, True)
    assert "A deltanet layer (1 layers; medians over them, us): 7.00" in out
    assert "A attention layer (1 layers; medians over them, us): 9.00" in out
    shares = pt.shares(pt.by_step(pt.parse(lines)))
    got = pt.layers(shares)
    assert [o.group.split(" ")[0] for o in got["deltanet"][0]] == KINDS[1:8]
    assert [o.group.split(" ")[0] for o in got["attention"][0]] == KINDS[8:17]
