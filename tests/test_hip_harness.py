"""The harness side of the vendor switch: a matrix entry with `module: {gpu: hip}` (validated,
built by hipcc into libkite_hip.so, SKIP with the install hint where hipcc is missing), the
engine.yaml build `hip`, the `hipcc` / `amd_gpu` probes, and the requirement answers that make
regressions/vendor.yaml judge hipcc's module (device criteria: SKIP "no AMD GPU")."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.builder import toolchains
from harness.matrix import run as matrix_run
from harness.matrix import spec as M
from harness.contract.config import load_config

ROOT = Path(__file__).resolve().parent.parent

HIP_ENTRY = """\
version: 1
entries:
  hip:
    toolchain: gcc
    cmake: {KITE_CUDA: ON, KITE_GPU: hip}
    module: {build: true, gpu: hip, archs: [gfx1030]}
    runner: native
    checks: [dump]
    requires: [linux, cmake, gcc, hipcc]
"""


def _messages(text: str) -> str:
    with pytest.raises(M.MatrixError) as e:
        M.parse_matrix(text, "configs/matrix.yaml")
    return "\n".join(e.value.messages)


def test_hip_entry_parses():
    ent = M.parse_matrix(HIP_ENTRY).entries["hip"]
    assert ent.module.gpu == "hip" and ent.module.archs == ("gfx1030",)


@pytest.mark.parametrize("edit, needle", [
    (("requires: [linux, cmake, gcc, hipcc]", "requires: [linux, cmake, gcc]"), "must require 'hipcc'"),
    (("archs: [gfx1030]", "archs: [90-real]"), "an AMD target like gfx1030"),
    (("cmake: {KITE_CUDA: ON, KITE_GPU: hip}", "cmake: {KITE_CUDA: ON}"), "KITE_GPU: hip"),
    (("gpu: hip", "gpu: rocm"), "allowed: cuda, hip"),
])
def test_bad_hip_entries_are_refused(edit, needle):
    msg = _messages(HIP_ENTRY.replace(*edit))
    assert needle in msg and "entries.hip" in msg, msg


def test_default_vendor_leaves_entry_digests_alone():
    """`gpu: cuda` is the default and not part of a digest: entries written before the key keep theirs."""
    text = HIP_ENTRY.replace("KITE_GPU: hip", "X: y").replace("gpu: hip, archs: [gfx1030]", "archs: [90-real]") \
        .replace(", hipcc]", "]")
    plain = M.parse_matrix(text).entries["hip"]
    explicit = M.parse_matrix(text.replace("archs: [90-real]", "gpu: cuda, archs: [90-real]")).entries["hip"]
    assert plain.digest() == explicit.digest()


def test_missing_hipcc_skips_with_install_hint(monkeypatch):
    ent = M.parse_matrix(HIP_ENTRY).entries["hip"]
    real = toolchains.probe

    def probe(name: str) -> toolchains.Tool:
        return toolchains._absent("hipcc", "hipcc not on PATH") if name == "hipcc" else real(name)

    monkeypatch.setattr(M.toolchains, "probe", probe)
    ok, why = M.availability(ent)
    assert not ok and "hipcc not on PATH" in why and "apt-get install hipcc libamdhip64-dev rocm-device-libs" in why


def test_real_matrix_has_a_hip_entry_judged_by_vendor_criteria():
    m = M.load_matrix(ROOT / "configs" / "matrix.yaml", ROOT)
    hip = [e for e in m.entries.values() if e.module.gpu == "hip"]
    assert hip and all("regressions/vendor.yaml" in e.criteria for e in hip)
    cuda = m.entries["linux-gcc"]
    assert "regressions/vendor.yaml" in cuda.criteria  # the same file on nvcc's module


def test_engine_yaml_names_the_hip_module():
    cfg = load_config(ROOT)
    assert cfg.module_for("default") == "libkite_cuda.so"
    assert cfg.module_for("hip") == "libkite_hip.so"
    assert cfg.builds["hip"].vendor == "hip" and cfg.builds["hip"].on_demand


def test_amd_gpu_targets_from_the_kfd_topology(tmp_path):
    nodes = tmp_path / "nodes"
    for i, version in enumerate((0, 100300, 90010)):  # node 0: the CPU (version 0)
        (nodes / str(i)).mkdir(parents=True)
        (nodes / str(i) / "properties").write_text(f"cpu_cores_count 0\ngfx_target_version {version}\n")
    assert toolchains.amd_gpu_targets(nodes) == ["gfx1030", "gfx90a"]
    assert toolchains.probe_amd_gpu(nodes, kfd=tmp_path).found
    gone = toolchains.probe_amd_gpu(nodes, kfd=tmp_path / "no-kfd")
    assert not gone.found and gone.reason.startswith("no AMD GPU")


def test_hipcc_version_banner():
    assert toolchains.parse_hipcc_version("HIP version: 5.2.21153-0\nDebian clang version 15.0.6\n") == \
        "5.2.21153-0"


def test_hip_entry_requirements_without_an_amd_gpu(monkeypatch):
    """In a HIP entry `gpu` means an AMD GPU: without one the device criteria SKIP, never pass,
    whatever NVIDIA GPU the machine has."""
    tools = {"hipcc": toolchains.Tool("hipcc", True, path="/usr/bin/hipcc", version="5.2.21153-0"),
             "amd_gpu": toolchains._absent("amd_gpu", "no AMD GPU (/dev/kfd absent: no amdgpu driver)")}
    monkeypatch.setattr(matrix_run.toolchains, "probe", lambda name: tools[name])
    got = matrix_run.hip_probes()
    assert got["module_cc"] == (True, "hipcc 5.2.21153-0")
    assert got["gpu"] == (False, "no AMD GPU (/dev/kfd absent: no amdgpu driver)")
