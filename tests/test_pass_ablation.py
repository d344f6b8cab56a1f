"""bench/pass_ablation.py (probe P8): the savings it reports from runs whose costs are planted, its
clear errors, and its groups against native/cuda's (the names ablation.cu takes, PassRole's order)."""

from __future__ import annotations

import importlib.util
import json
import re
import stat
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# a planted cost a step (us), op count and weight bytes per group; the fake engine's step is BASE_US
# less the costs of the groups left out (and SHIPPED_US with the shipped module), plus the host's
# pick: PICK_US, and 30 us more when the embedding is left out (as a pass of wrong logits can do)
COSTS = {"norm": (80.0, 49, 0), "dn_head": (54.0, 18, 0), "lm_head": (60.0, 4, 270_000_000), "embed": (1.0, 1, 0),
         "copy_back": (12.0, 4, 0)}
BASE_US, SHIPPED_US, PICK_US = 650.0, 648.0, 25.0


def _ablation():
    sys.path.insert(0, str(REPO / "bench"))
    spec = importlib.util.spec_from_file_location("pass_ablation", REPO / "bench" / "pass_ablation.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["pass_ablation"] = mod
    spec.loader.exec_module(mod)
    return mod


FAKE = '''#!{python}
import json, os, sys
costs = {costs!r}
lib = os.environ["KITE_CUDA_LIB"]
groups = [g for g in os.environ.get("KITE_CUDA_ABLATE", "").split(",") if g]
args = sys.argv
steps, iters = int(args[args.index("--steps") + 1]), int(args[args.index("--iters") + 1])
step_us = {shipped} if lib.endswith("shipped.so") else {base} - sum(costs.get(g, (0.0, 0, 0))[0] for g in groups)
pick_us = {pick} + (30.0 if "embed" in groups else 0.0)
if groups and lib.endswith("ablation.so"):  # a shipped module leaves nothing out and says nothing
    said = " ".join(f"{{g}} {{costs.get(g, (0.0, 0, 0))[1]}} {{costs.get(g, (0.0, 0, 0))[2]}}" for g in groups)
    print(f"kite_cuda: ablation: the M=1 pass has 186 kernels; left out: {{said}}", file=sys.stderr)
print(json.dumps({{"timings": {{"decode_ms": [(step_us + pick_us) * steps / 1e3] * iters,
                               "step_greedy_ms": [pick_us * steps / 1e3] * iters}},
                  "nonfinite": {{"h_out": 0, "logits": 248320 if "embed" in groups else 0}},
                  "counters": {{"graph_replays": 3}}}}))
'''


def _fake(tmp_path: Path) -> tuple[Path, Path, Path, Path]:
    kite = tmp_path / "kite"
    kite.write_text(FAKE.format(python=sys.executable, costs=COSTS, shipped=SHIPPED_US, base=BASE_US, pick=PICK_US))
    kite.chmod(kite.stat().st_mode | stat.S_IXUSR)
    shipped, ablation, model = tmp_path / "shipped.so", tmp_path / "ablation.so", tmp_path / "m.gguf"
    for f in (shipped, ablation, model):
        f.write_bytes(b"x")
    return kite, shipped, ablation, model


def test_savings_of_planted_costs(tmp_path: Path) -> None:
    pa = _ablation()
    kite, shipped, ablation, model = _fake(tmp_path)
    md, js = tmp_path / "a.md", tmp_path / "a.json"
    rc = pa.main(["--kite", str(kite), "--module", str(ablation), "--base-module", str(shipped), "--model", str(model),
                  "--variants", "norm", "dn_head", "norm+dn_head", "embed", "copy_back", "--rounds", "3", "--md", str(md),
                  "--json",
                  str(js), "--no-copy"])
    assert rc == 0
    s = json.loads(js.read_text())
    assert s["all_us"] == pytest.approx(BASE_US) and s["shipped_us"] == pytest.approx(SHIPPED_US)
    assert s["same_build"] is True
    v = s["variants"]
    assert v["norm"]["saving_us"] == pytest.approx(80.0) and v["norm"]["ops"] == 49
    assert v["norm"]["saving_us_an_op"] == pytest.approx(80.0 / 49)
    assert v["dn_head"]["saving_us"] == pytest.approx(54.0)
    assert v["norm+dn_head"]["saving_us"] == pytest.approx(134.0) and v["norm+dn_head"]["ops"] == 67
    assert v["norm+dn_head"]["by_group"] == {"norm": 49, "dn_head": 18}
    # the pick is left out of each step: the embedding's dearer pick does not read as a loss
    assert v["embed"]["saving_us"] == pytest.approx(1.0) and v["embed"]["pick_us"] == pytest.approx(55.0)
    assert v["embed"]["nonfinite_logits"] == 248320 and v["norm"]["nonfinite_logits"] == 0
    assert s["pick_us"] == pytest.approx(PICK_US)
    # the copies back are no group of kernels: their 4 pieces are not counted against the 186
    assert v["copy_back"]["saving_us"] == pytest.approx(12.0) and v["copy_back"]["ops"] == 4
    assert s["kernels"] == 186 and s["covered"] == 68 and s["every_group"] is False
    assert len(s["runs"]) == 3
    text = md.read_text()
    assert "| norm + dn_head | 67 | 0.0 | 516.0 | 134.0 | 134.0 .. 134.0 | 2.00 | 20.6% | - | - | 25.0 | 0 |" in text
    assert "| 55.0 | 248320 |" in text
    assert "no device copy measured" in text
    assert "median 1.003, within 2%" in text


def test_the_bytes_time_at_the_copys_speed() -> None:
    """270 MB at 3000 GB/s are 90 us: of a 120 us saving, 30 are beyond the bytes."""
    pa = _ablation()
    runs = [{"shipped": pa.Run(0.650, {}), "all": pa.Run(0.650, {}),
             "lm_head": pa.Run(0.530, {"lm_head": 4}, 186, 0.02, {"lm_head": 270_000_000})}]
    s = pa.summarize(runs, ["lm_head"], 3000.0)
    r = s["variants"]["lm_head"]
    assert r["bytes_us"] == pytest.approx(90.0) and r["beyond_bytes_us"] == pytest.approx(30.0)
    assert "| lm_head | 4 | 270.0 | 530.0 | 120.0 | 120.0 .. 120.0 | 30.00 | 18.5% | 90.0 | 30.0 | 20.0 | 0 |" in \
        pa.markdown(s, "m")


def test_a_build_that_runs_apart_is_said(tmp_path: Path) -> None:
    pa = _ablation()
    runs = [{"shipped": pa.Run(0.600, {}), "all": pa.Run(0.650, {}), "norm": pa.Run(0.570, {"norm": 49}, 186)}]
    s = pa.summarize(runs, ["norm"])
    assert s["same_build"] is False
    assert "NOT within 2%: the savings below are not the shipped module's" in pa.markdown(s, "m.gguf")


def test_every_group_run_checks_the_cover(tmp_path: Path) -> None:
    pa = _ablation()
    one = {g: pa.Run(0.640, {g: 10}, 130) for g in pa.GROUPS}
    s = pa.summarize([{"shipped": pa.Run(0.65, {}), "all": pa.Run(0.65, {}), **one}], list(pa.GROUPS))
    assert s["every_group"] and s["covered"] == 130
    assert "each kernel is in a group" in pa.markdown(s, "m")
    one["lm_head"] = pa.Run(0.640, {"lm_head": 4}, 130)
    s = pa.summarize([{"shipped": pa.Run(0.65, {}), "all": pa.Run(0.65, {}), **one}], list(pa.GROUPS))
    assert "SOME KERNELS ARE IN NO GROUP" in pa.markdown(s, "m")


def test_a_shipped_module_is_refused(tmp_path: Path) -> None:
    """A module without the ablation build leaves nothing out and says nothing: an error, not a zero."""
    pa = _ablation()
    kite, shipped, _, model = _fake(tmp_path)
    with pytest.raises(RuntimeError, match="not built with KITE_CUDA_ABLATION=ON"):
        pa.main(["--kite", str(kite), "--module", str(shipped), "--base-module", str(shipped), "--model", str(model),
                 "--variants", "norm", "--rounds", "1", "--no-copy"])


def test_left_out_must_be_the_variants() -> None:
    pa = _ablation()
    line = "kite_cuda: ablation: the M=1 pass has 186 kernels; left out: norm 49 0 dn_in 18 160000000\n"
    assert pa.left_out("noise\n" + line, ("norm", "dn_in")) == (186, {"norm": 49, "dn_in": 18},
                                                                 {"norm": 0, "dn_in": 160000000})
    with pytest.raises(RuntimeError, match="not the variant's"):
        pa.left_out(line, ("norm",))


@pytest.mark.parametrize("text, message", [("norm+foo", "'foo' is not a group of ops"),
                                           ("norm+norm", "names a group twice"), ("", "'' is not a group")])
def test_bad_variants(text: str, message: str) -> None:
    pa = _ablation()
    with pytest.raises(ValueError, match=message):
        pa.parse_variant(text)


def test_bad_arguments_are_clear(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pa = _ablation()
    kite, shipped, ablation, model = _fake(tmp_path)
    with pytest.raises(SystemExit):
        pa.main(["--kite", str(kite), "--module", str(ablation), "--base-module", str(shipped), "--model",
                 str(tmp_path / "none.gguf")])
    assert "none.gguf: no such file" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        pa.main(["--kite", str(kite), "--module", str(ablation), "--model", str(model), "--rounds", "0"])
    assert "--rounds must be at least 1" in capsys.readouterr().err


def test_rounds_alternate_their_order() -> None:
    pa = _ablation()
    assert pa.order(["a", "b", "c"], 0) == ["a", "b", "c"] and pa.order(["a", "b", "c"], 1) == ["c", "b", "a"]


def test_groups_are_the_modules() -> None:
    """The names ablation.cu takes, in PassRole's order, are GROUPS: a group renamed or added on
    one side only would leave its ops out of every variant or refuse them."""
    pa = _ablation()
    src = (REPO / "native" / "cuda" / "ablation.cu").read_text()
    names = re.search(r"role_names\[ROLE_COUNT\] = \{(.*?)\};", src, re.S).group(1)
    assert tuple(re.findall(r'"([a-z_]*)"', names)) == ("", *pa.GROUPS)
    enum = re.search(r"enum PassRole \{(.*?)\};", (REPO / "native" / "cuda" / "pass_ops.cuh").read_text(), re.S).group(1)
    roles = re.findall(r"^\s*(ROLE_[A-Z_]+)", enum, re.M)
    assert roles[0] == "ROLE_NONE" and roles[-1] == "ROLE_COUNT"
    assert [r.removeprefix("ROLE_").lower() for r in roles[1:-1]] == list(pa.GROUPS)
    assert f'copy_back_name[] = "{pa.COPY_BACK}";' in src


def test_the_shipped_module_has_no_ablation() -> None:
    cmake = (REPO / "native" / "cuda" / "CMakeLists.txt").read_text()
    assert 'option(KITE_CUDA_ABLATION "leave out the op groups that KITE_CUDA_ABLATE names" OFF)' in cmake
    assert re.search(r"if\(KITE_CUDA_ABLATION\)\s+list\(APPEND KITE_CUDA_DEFS KC_ABLATION=1\)", cmake)
