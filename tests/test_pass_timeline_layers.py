"""bench/pass_timeline.py --layers: a step's ops split into DeltaNet and attention layers, each
layer ending with the product after gate/up, on a synthetic step whose shares are known."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
NO_WAIT = 2**64 - 1


def _timeline():
    spec = importlib.util.spec_from_file_location("pass_timeline", REPO / "bench" / "pass_timeline.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["pass_timeline"] = mod
    spec.loader.exec_module(mod)
    return mod


# one op a microsecond: embed, a DeltaNet layer (7 ops), an attention layer (9 ops), the LM head
KINDS = (["embed"] + ["actq", "gemv", "deltanet_head", "gemv", "actq", "gemv_glu", "gemv"]
         + ["actq", "gemv", "qkprep", "scores", "values", "gemv", "actq", "gemv_glu", "gemv"] + ["actq", "gemv"])


def _step(step: int) -> list[str]:
    t0 = step * 10**6
    return [f"{step} {i} {k} 4 1 1 256 1 1 {t0 + 1000 * i - 500} {t0 + 1000 * i - 200} {t0 + 1000 * i + 1000}"
            for i, k in enumerate(KINDS)]


def test_layers_split_by_kind_and_sum_their_ops():
    pt = _timeline()
    lines = [ln for s in range(2) for ln in _step(s)]
    out = pt.report(pt.parse(lines), 0, False, True)
    assert "A deltanet layer (1 layers; medians over them, us): 7.00" in out
    assert "A attention layer (1 layers; medians over them, us): 9.00" in out
    shares = pt.shares(pt.by_step(pt.parse(lines)))
    got = pt.layers(shares)
    assert [o.group.split(" ")[0] for o in got["deltanet"][0]] == KINDS[1:8]
    assert [o.group.split(" ")[0] for o in got["attention"][0]] == KINDS[8:17]
