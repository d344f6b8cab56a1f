"""configs/matrix.yaml: the real file validates; bad entries give clear errors naming the file,
the line, the key path (entries.<entry>.<key>) and what is allowed, in the same format as
criteria files (one validator: harness/contract/validate.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.matrix import spec as M

ROOT = Path(__file__).resolve().parent.parent

GOOD = """\
version: 1
defaults:
  dump:
    model: tiny
    prompt: [1, 2, 3]
    steps: 2
    variants:
      cpu: {env: {KITE_CUDA_FORCE_CPU: "1"}}
      gpu: {requires: [gpu]}
entries:
  linux-gcc:
    toolchain: gcc
    cmake: {KITE_CUDA: ON}
    module: {build: true, archs: [90-real, 90-virtual], host_compiler: gcc}
    testmod: true
    runner: native
    checks: [dump, loader-fake]
    criteria: [regressions/suite.yaml#E3]
    requires: [linux, cmake, gcc]
  win:
    toolchain: mingw
    cmake: {KITE_CUDA: ON}
    runner: wine
    checks: [dump]
    requires: [mingw, wine]
  sm80:
    toolchain: gcc
    engine: false
    module: {archs: [80-real], expect_elf: [sm_80], expect_ptx: []}
    runner: native
    checks: [embedded-code]
    requires: [nvcc]
cross:
  X1:
    title: same bytes
    entries: [linux-gcc:cpu, win:cpu]
"""


def bad(text: str) -> list[str]:
    with pytest.raises(M.MatrixError) as e:
        M.parse_matrix(text, "configs/matrix.yaml")
    return e.value.messages


def find(msgs: list[str], needle: str) -> str:
    hits = [m for m in msgs if needle in m]
    assert hits, f"{needle!r} not in {msgs}"
    return hits[0]


def edit(old: str, new: str) -> str:
    assert old in GOOD, old
    return GOOD.replace(old, new, 1)


def test_repository_matrix_is_valid():
    m = M.load_matrix(ROOT / "configs" / "matrix.yaml", ROOT)
    names = set(m.entries)
    assert {"linux-gcc", "linux-clang", "linux-gcc-asan", "linux-gcc-nocuda", "win64-mingw", "cuda-sm80",
            "cuda-sm90", "cuda-sm90-ptx", "win64-msvc"} <= names
    assert m.entries["win64-mingw"].runner == "wine"
    assert m.entries["linux-gcc-nocuda"].cmake["KITE_CUDA"] == "OFF"
    assert m.entries["linux-gcc-asan"].cmake["KITE_SANITIZE"] == "address,undefined"
    assert not m.entries["linux-gcc-asan"].module.build
    assert m.entries["cuda-sm90-ptx"].module.expect_ptx == ("sm_90",)
    assert m.entries["cuda-sm80"].module.expect_ptx == ()
    assert m.entries["linux-clang"].module.host_compiler == "clang"
    assert m.entries["win64-msvc"].module.host_compiler == "msvc"
    assert "msvc" in m.entries["win64-msvc"].requires
    x1 = m.cross["X1"]
    assert [e for e, _ in x1.entries] == ["linux-gcc", "linux-clang", "linux-gcc-asan", "win64-mingw"]
    for ent in m.entries.values():  # every entry states toolchain, runner, requires
        assert ent.toolchain and ent.runner and ent.requires


def test_good_text_parses():
    m = M.parse_matrix(GOOD)
    assert list(m.entries) == ["linux-gcc", "win", "sm80"]
    assert m.entries["linux-gcc"].cmake == {"KITE_CUDA": "ON"}
    assert m.entries["linux-gcc"].criteria == ("regressions/suite.yaml#E3",)
    assert m.entries["sm80"].module.build is True  # build defaults to true inside a module mapping
    assert m.dump.prompt == (1, 2, 3)
    assert m.dump.variant("gpu").requires == ("gpu",)
    assert m.cross["X1"].entries == (("linux-gcc", "cpu"), ("win", "cpu"))
    assert m.select(["win"])[0].name == "win"
    with pytest.raises(M.MatrixError, match="no entry 'nope'"):
        m.select(["nope"])


# ---- bad inputs: each names file:line, entry, key and what is allowed -----------------------

def test_unknown_toolchain():
    msg = find(bad(edit("toolchain: mingw", "toolchain: msvc-cl")), "'msvc-cl'")
    assert msg == "configs/matrix.yaml:21: entries.win.toolchain: 'msvc-cl' is not allowed; allowed: gcc, clang, mingw"


def test_unknown_runner():
    (msg,) = bad(edit("runner: wine", "runner: docker"))
    assert msg == "configs/matrix.yaml:23: entries.win.runner: 'docker' is not allowed; allowed: native, wine"


def test_unknown_key_in_entry():
    msg = find(bad(edit("    testmod: true\n", "    testmods: true\n")), "unknown key")
    assert msg.startswith("configs/matrix.yaml:15: entries.linux-gcc.testmods: unknown key 'testmods' in an entry; "
                          "allowed: description, toolchain, cmake")


def test_unknown_check():
    msg = find(bad(edit("checks: [dump, loader-fake]", "checks: [dumps, loader-fake]")), "'dumps'")
    assert msg == ("configs/matrix.yaml:17: entries.linux-gcc.checks[0]: 'dumps' is not allowed; "
                   "allowed: dump, loader-fake, embedded-code, msvc-discovery")


def test_checks_that_are_criteria_now_are_refused():
    """info, selftest and stub-equal are criteria (regressions/matrix/entry.yaml M1-M4)."""
    msg = find(bad(edit("checks: [dump, loader-fake]", "checks: [dump, selftest]")), "'selftest'")
    assert "entries.linux-gcc.checks[1]: 'selftest' is not allowed" in msg


def test_unknown_requirement():
    (msg,) = bad(edit("requires: [mingw, wine]", "requires: [mingw, wine, docker]"))
    assert "entries.win.requires[2]: 'docker' is not allowed; allowed: gcc, clang, mingw, wine, nvcc" in msg


def test_missing_required_keys():
    msgs = bad(edit("    toolchain: mingw\n", ""))
    assert any("entries.win: missing required key 'toolchain' in an entry" in m for m in msgs)


def test_bad_arch_and_host_compiler():
    msgs = bad(edit("archs: [90-real, 90-virtual], host_compiler: gcc", "archs: [sm_90], host_compiler: icc"))
    assert any("entries.linux-gcc.module.archs[0]: 'sm_90' is not valid: a CUDA architecture" in m for m in msgs)
    assert any("entries.linux-gcc.module.host_compiler: 'icc' is not allowed; allowed: gcc, clang, msvc" in m
               for m in msgs)


def test_wine_needs_mingw():
    msgs = bad(edit("toolchain: mingw", "toolchain: gcc"))
    assert any("runner 'wine' runs Windows programs: toolchain must be 'mingw', not 'gcc'" in m for m in msgs)


def test_embedded_code_needs_expectations():
    (msg,) = bad(edit("expect_elf: [sm_80], expect_ptx: []", "expect_elf: [sm_80]"))
    assert "check 'embedded-code' needs module.build and both module.expect_elf and module.expect_ptx" in msg


def test_engine_false_with_engine_checks():
    (msg,) = bad(edit("checks: [embedded-code]", "checks: [embedded-code, dump]"))
    assert msg == "configs/matrix.yaml:31: entries.sm80.checks: check 'dump' needs the engine, but `engine: false`"


def test_loader_fake_needs_testmod_and_loader():
    msgs = bad(edit("KITE_CUDA: ON}\n    module", "KITE_CUDA: OFF}\n    module").replace("testmod: true", "testmod: false"))
    assert any("'loader-fake' needs `testmod: true`" in m for m in msgs)
    assert any("'loader-fake' needs the loader (cmake KITE_CUDA: ON)" in m for m in msgs)


def test_wrong_types():
    msgs = bad(edit("cmake: {KITE_CUDA: ON}\n    runner: wine", "cmake: [KITE_CUDA]\n    runner: wine")
               .replace("testmod: true", "testmod: yes please"))
    assert any("entries.win.cmake: must be a mapping of CMake OPTION: value, not a list" in m for m in msgs)
    assert any("entries.linux-gcc.testmod: must be true or false, not a string" in m for m in msgs)


def test_bad_entry_name_and_duplicate_key():
    msgs = bad(GOOD.replace("  win:\n", "  Win 64:\n").replace("win:cpu", "linux-gcc:gpu"))
    assert any("entries.Win 64: entry name 'Win 64' must be lower-case" in m for m in msgs)
    msgs = bad(edit("    runner: native\n    checks: [dump", "    runner: native\n    runner: wine\n    checks: [dump"))
    assert any(m.startswith("configs/matrix.yaml:17: entries.linux-gcc.runner: duplicate key 'runner'") for m in msgs)


def test_cross_refers_to_unknown_entry_or_variant():
    msgs = bad(edit("entries: [linux-gcc:cpu, win:cpu]", "entries: [linux-gcc:cpu, win:fpga, mac:cpu]"))
    assert any("cross.X1.entries[1]: no dump variant 'fpga'; allowed: cpu, gpu" in m for m in msgs)
    assert any("cross.X1.entries[2]: no entry 'mac'; allowed: linux-gcc, win, sm80" in m for m in msgs)


def test_cross_entry_without_dump_check():
    (msg,) = bad(edit("entries: [linux-gcc:cpu, win:cpu]", "entries: [linux-gcc:cpu, sm80:cpu]"))
    assert "entry 'sm80' has no 'dump' check" in msg


def test_bad_defaults():
    msgs = bad(edit("prompt: [1, 2, 3]", "prompt: [1, -2]").replace("steps: 2", "steps: many"))
    assert any("defaults.dump.prompt: must be a non-empty list of token ids" in m for m in msgs)
    assert any("defaults.dump.steps: must be an integer, not a string" in m for m in msgs)


def test_yaml_syntax_and_top_level():
    (msg,) = bad("entries: {a: [1, 2}\n")
    assert msg.startswith("configs/matrix.yaml:1: not valid YAML")
    (msg,) = bad("- just a list\n")
    assert msg == "configs/matrix.yaml:1: (top level): the build matrix must be a mapping, not a list"
    msgs = bad(GOOD + "buidl: 1\n")
    assert any(m.startswith("configs/matrix.yaml:37: buidl: unknown key 'buidl' in the build matrix; allowed: "
                            "version, defaults, entries, cross") for m in msgs)


def test_all_errors_reported_at_once():
    text = edit("runner: wine", "runner: docker").replace("toolchain: mingw", "toolchain: tcc")
    msgs = bad(text)
    assert len(msgs) >= 2


def test_missing_file(tmp_path):
    with pytest.raises(M.MatrixError, match="build matrix not found"):
        M.load_matrix(tmp_path / "matrix.yaml")


def test_entry_digest_changes_with_content():
    a = M.parse_matrix(GOOD).entries["win"]
    b = M.parse_matrix(edit("checks: [dump]\n", "checks: [dump]\n    env: {A: b}\n")).entries["win"]
    assert a.digest() != b.digest() and a.digest().startswith("sha256:")


@pytest.mark.parametrize("name", ["../x", "CPU", "a/b", "-x"])
def test_dump_variant_names_are_folder_names(name, tmp_path):
    """A dump variant's name becomes a folder of the report (dumps/<entry>/<variant>)."""
    text = (ROOT / "configs" / "matrix.yaml").read_text()
    assert "\n      cpu:" in text
    (tmp_path / "matrix.yaml").write_text(text.replace("\n      cpu:", f"\n      {name!r}:", 1))
    with pytest.raises(M.MatrixError) as e:
        M.load_matrix(tmp_path / "matrix.yaml", ROOT)
    assert any("is not a variant name" in m for m in e.value.messages), e.value.messages
