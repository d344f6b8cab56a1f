"""scripts/pack_external.py: an external source packed for an offline host keeps every file the
build reads, leaves out the named top folders, says so in its SOURCE.json, and unpacks into a
cache that the harness takes as the pinned source (KITE_CACHE)."""

from __future__ import annotations

import importlib.util
import json
import tarfile
from pathlib import Path

from harness.builder import external
from harness.contract.config import ExternalSource

ROOT = Path(__file__).resolve().parents[1]
SHA = "ab" * 32


def _script():
    spec = importlib.util.spec_from_file_location("pack_external", ROOT / "scripts" / "pack_external.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _cache(tmp: Path) -> tuple[Path, ExternalSource]:
    src = ExternalSource(name="lib", pip_sdist="lib==1.0", sha256=SHA, subdir="vendor/lib")
    folder = tmp / "cache" / "src" / f"lib-{SHA[:16]}"
    for rel, text in {"include/lib.h": "int f(void);\n", "src/lib.c": "int f(void) { return 1; }\n",
                      "models/big.gguf": "x" * 1000, "docs/a.md": "# a\n", "CMakeLists.txt": "# top\n"}.items():
        p = folder / src.subdir / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    (folder / external.MARKER).write_text(json.dumps({"name": "lib", "sha256": SHA, "subdir": src.subdir}))
    return folder, src


def test_a_pack_leaves_out_what_it_names_and_says_so(tmp_path):
    folder, src = _cache(tmp_path)
    out = tmp_path / "lib.tar.gz"
    counts = _script().pack(folder, out, ["models", "docs"])
    assert counts == {"kept": 3, "left_out": 2}
    with tarfile.open(out) as tar:
        names = set(tar.getnames())
    base = f"src/lib-{SHA[:16]}"
    assert {f"{base}/vendor/lib/include/lib.h", f"{base}/vendor/lib/src/lib.c",
            f"{base}/vendor/lib/CMakeLists.txt", f"{base}/SOURCE.json"} == names
    unpacked = tmp_path / "host"
    with tarfile.open(out) as tar:
        tar.extractall(unpacked, filter="data")
    marker = json.loads((unpacked / base / "SOURCE.json").read_text())
    assert marker["omitted"] == ["docs", "models"] and marker["sha256"] == SHA
    # the host's harness takes the unpacked tree as the pinned source, with no archive and no network
    got = external.fetch(src, env={"KITE_CACHE": str(unpacked)})
    assert got == unpacked / base / "vendor" / "lib"
    assert (got / "src" / "lib.c").read_text() == "int f(void) { return 1; }\n"


def test_an_unknown_external_name_is_a_clear_error(capsys):
    assert _script().main(["no-such-source", "/nonexistent/out.tar.gz"]) == 2
    err = capsys.readouterr().err
    assert "no-such-source: not an entry of configs/engine.yaml's external: (llama.cpp)" in err
