"""configs/engine.yaml read strictly (FILE:LINE, unknown keys, allowed values) and its profile
used: env roles (`{env.graph}`), the GPU probe's build and fields, dump dtypes, `model:` paths."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest

from conftest import ENGINE_YAML
from harness.errors import ConfigError, SchemaErrors
from harness.run.dumpdiff import compare_bytes
from harness.run.probes import Probes
from harness.contract import schema
from harness.contract.config import GpuProfile, load_config, parse_config

REPO = Path(__file__).resolve().parent.parent


def errors(text: str) -> list[str]:
    with pytest.raises(ConfigError) as e:
        parse_config(text, REPO, REPO / "configs" / "engine.yaml", "configs/engine.yaml")
    return e.value.messages


def test_repository_config_is_valid():
    cfg = load_config(REPO)
    assert {d.dtype for d in cfg.dumps.values()} == {"f32"}
    assert cfg.gpu == GpuProfile("default", "cuda.available", "cuda.reason", "cuda.device.name")
    assert cfg.env_names["graph"] == "KITE_CUDA_GRAPH"


def test_typo_in_engine_key_is_an_error_with_its_line():
    (msg,) = errors(ENGINE_YAML.replace("  meta_file: meta.json", "  meta_fle: meta.json"))
    assert msg.startswith("configs/engine.yaml:8: engine.meta_fle: unknown key 'meta_fle' in engine; allowed: ")


def test_typo_in_top_level_key_is_an_error():
    (msg,) = errors(ENGINE_YAML + "buidl: {jobs: 2}\n")
    assert msg.startswith("configs/engine.yaml:20: buidl: unknown key 'buidl' in the engine configuration")


@pytest.mark.parametrize("old, new, needle", [
    ("{file: h_out.f32, shape: shapes.h_out}", "{file: h_out.f32, dtype: float64, shape: shapes.h_out}",
     "engine.dumps.h_out.dtype: 'float64' is not allowed; allowed: f32, f16, bf16, i32"),
    ("timeouts: {run: 20,", "timeouts: {rnu: 20,", "timeouts.rnu: 'rnu' is not allowed; allowed: build, run"),
    ("timeouts: {run: 20,", "timeouts: {run: -1,", "timeouts.run: must be > 0, not -1"),
    ("  default: {prebuilt: fakebin/default}", "  default: {prebuilt: fakebin/default, engine: {source: x}}",
     "builds.default.prebuilt: a prebuilt build is used as it is"),
    ("  stub: {prebuilt: fakebin/stub}", "  stub: {}", "builds.stub: needs `engine` (a CMake project) or `prebuilt`"),
    ("  info_args: [info, --json]", "  info_args: [info, --json]\n  gpu: {build: gpus}",
     "engine.gpu.build: unknown build 'gpus'"),
    ("  info_args: [info, --json]", "  info_args: [info, --json]\n  gpu: {available: 'cuda available'}",
     "engine.gpu.available: 'cuda available' is not valid"),
])
def test_bad_values_are_errors(old, new, needle):
    assert old in ENGINE_YAML
    msgs = errors(ENGINE_YAML.replace(old, new))
    assert any(needle in m for m in msgs), msgs


def test_all_problems_reported_at_once():
    text = ENGINE_YAML.replace("meta_file:", "meta_fle:").replace("reports: {dir: reports}", "reprots: {}")
    assert len(errors(text)) == 2


def test_missing_file_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="engine configuration not found"):
        load_config(tmp_path)


# ---- env roles -------------------------------------------------------------------------------

GRAPH_OFF = """\
criteria:
  - id: R
    title: the graph gate is off when its role's variable is 0
    kind: run
    runs:
      - args: [info, --json]
        env: {"{env.graph}": "0"}
        expect: {json: {cuda.gates.graph: false}}
"""


def test_env_role_maps_to_the_engines_name(fake_repo):
    cfg = fake_repo.root / "configs" / "engine.yaml"
    cfg.write_text(cfg.read_text().replace("  meta_file:", "  env: {graph: KITE_CUDA_GRAPH}\n  meta_file:"))
    p = fake_repo.criteria(GRAPH_OFF)
    fake_repo.register(p)
    assert fake_repo.verify() == 0
    assert fake_repo.result("R")["details"]["runs"][0]["env_overlay"] == {"KITE_CUDA_GRAPH": "0"}
    # another engine's name for the role: the fake engine does not read it, so the gate stays on
    cfg.write_text(cfg.read_text().replace("graph: KITE_CUDA_GRAPH", "graph: OTHER_GRAPH"))
    assert fake_repo.verify() == 1
    assert "cuda.gates.graph = true, wanted false" in fake_repo.result("R")["reason"]


def test_unknown_env_role_is_a_schema_error():
    with pytest.raises(SchemaErrors) as e:
        schema.load_text(GRAPH_OFF, "r.yaml", ["default"], ["h_out"], ["module_path"])
    assert "r.yaml:7: criteria[0] (R).runs[0].env.{env.graph}: unknown placeholder {env.graph}" in e.value.messages[0]
    assert "{env.module_path}" in e.value.messages[0]


# ---- model: a recipe or a path ------------------------------------------------------------------

MODEL_PATH = """\
criteria:
  - id: MP
    title: a model given by path
    kind: run
    model: %s
    runs:
      - args: [run, --model, "{model}", --json]
"""


def test_model_path(fake_repo):
    (c,) = schema.load_text(MODEL_PATH % "models/tiny.gguf", "m.yaml", ["default"], [])
    assert c.model == {"path": "models/tiny.gguf"}
    (c,) = schema.load_text(MODEL_PATH % "tiny", "m.yaml", ["default"], [])
    assert c.model == {"recipe": "tiny", "qtype": None}
    p = fake_repo.criteria(MODEL_PATH % "models/tiny.gguf")
    fake_repo.register(p)
    assert fake_repo.verify() == 0
    p.write_text((MODEL_PATH % "{path: models/absent.gguf}").replace("id: MP", "id: MQ"))
    assert fake_repo.verify("--exploratory") == 1
    assert "absent.gguf not found" in fake_repo.result("MQ")["reason"]


# ---- the GPU probe reads the fields the profile names -----------------------------------------

def test_gpu_probe_fields_from_the_profile():
    info = {"backend": {"usable": True, "why": "", "name": "Other GPU"}, "cuda": {"available": False}}
    prof = GpuProfile("default", "backend.usable", "backend.why", "backend.name")
    assert Probes(lambda: info, smi=lambda: [], gpu=prof).check("gpu") == (True, "GPU Other GPU")
    # the default profile reads cuda.available, which says no
    assert Probes(lambda: info, smi=lambda: []).check("gpu")[0] is False
    info["backend"] = {"usable": False, "why": "no device here"}
    assert Probes(lambda: info, smi=lambda: [], gpu=prof).check("gpu") == (False, "no GPU: no device here")


def test_gpu_probe_uses_the_profiles_build(fake_repo):
    """`gpu.build: gpu` makes the fake `gpu` build (a device) answer instead of `default` (none)."""
    text = """\
criteria:
  - {id: G, title: needs a GPU, kind: run, requires: [gpu], runs: [{args: [info, --json]}]}
"""
    fake_repo.register(fake_repo.criteria(text))
    assert fake_repo.verify(gpu=None) == 0
    assert fake_repo.result("G")["verdict"] == "SKIP"
    cfg = fake_repo.root / "configs" / "engine.yaml"
    cfg.write_text(cfg.read_text().replace("  info_args: [info, --json]", "  info_args: [info, --json]\n"
                                                                        "  gpu: {build: gpu}"))
    assert fake_repo.verify(gpu=None) == 0
    assert fake_repo.result("G")["verdict"] == "PASS"


# ---- dump dtypes --------------------------------------------------------------------------------

def bf16(*xs: float) -> bytes:
    return b"".join(struct.pack("<f", x)[2:] for x in xs)


def test_bf16_compared_as_bf16():
    a, b = bf16(1.0, 2.0), bf16(1.0, 2.015625)  # 2.015625 is the next bf16 after 2.0
    d = compare_bytes(a, b, dtype="bf16")
    assert not d.identical and d.max_ulp == 1 and d.differing == 1 and d.first_values == (2.0, 2.015625)
    # read as float32 the same 4 bytes are one element, differing by 2**16 float32 ULPs... or wrong size
    assert compare_bytes(a, b, dtype="f32").max_ulp == 2**16
    ok = compare_bytes(a, b, mode="tolerance", max_ulp=1, dtype="bf16")
    assert ok.ok


def test_dump_size_checked_against_dtype_and_shape():
    three = bf16(1.0, 2.0, 3.0)
    assert "not a whole number of float32" in compare_bytes(three, three).reason
    assert compare_bytes(three, three, dtype="bf16").ok
    d = compare_bytes(three, three, dtype="bf16", shape_a=[4], shape_b=[4])
    assert not d.ok and "6 bytes but meta.json shape [4] needs 8" in d.reason
    f16 = np.array([1.0, 65504.0], dtype="<f2").tobytes()
    g16 = np.array([1.0, 65472.0], dtype="<f2").tobytes()
    assert compare_bytes(f16, g16, dtype="f16").max_ulp == 1
    i = np.array([5, -7], dtype="<i4").tobytes()
    j = np.array([5, -4], dtype="<i4").tobytes()
    d = compare_bytes(i, j, dtype="i32")
    assert d.max_ulp == 3 and d.max_abs == 3.0 and d.first_values == (-7.0, -4.0)
