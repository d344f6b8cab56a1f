"""Shared fixtures: a throw-away repository whose "builds" are the fake engine."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

FAKE = Path(__file__).resolve().parent / "fake_engine.py"

ENGINE_YAML = """\
engine:
  binary: kite
  module: libkite_cuda.so
  testmods_dir: testmods
  dumps:
    h_out: {file: h_out.f32, shape: shapes.h_out}
    logits: {file: logits.f32, shape: shapes.logits}
  meta_file: meta.json
  info_args: [info, --json]
  ignore_exports: [_init, _fini, _edata, _end, __bss_start]
builds:
  default: {prebuilt: fakebin/default}
  stub: {prebuilt: fakebin/stub}
  gpu: {prebuilt: fakebin/gpu}
models:
  dir: models
  default: {path: models/tiny.gguf}
timeouts: {run: 20, info: 10, probe: 10}
reports: {dir: reports}
"""


@pytest.fixture(autouse=True)
def _fake_noise_state(request, tmp_path_factory, monkeypatch):
    """Each test counts its fake-engine runs afresh, so the fake's noisy times are the same draws
    in every session (tests/fake_engine.py, FAKE_NOISE)."""
    name = hashlib.sha1(request.node.nodeid.encode()).hexdigest()[:16]
    monkeypatch.setenv("FAKE_NOISE_STATE", str(tmp_path_factory.getbasetemp() / f"noise-runs-{name}"))


def planted_context(tmp: Path):
    """A runner.Context on a repository under tmp whose default build is prebuilt (a `kite` and a
    module file that are never run), for tests that plant the engine's runs in-process."""
    from harness.builder.cmake import BuildResult, PartResult
    from harness.run import runner
    from harness.run.probes import Probes
    from harness.contract.config import load_config

    root = tmp / "repo"
    (root / "configs").mkdir(parents=True)
    (root / "configs" / "engine.yaml").write_text(ENGINE_YAML)
    bins = root / "fakebin" / "default"
    bins.mkdir(parents=True)
    (bins / "kite").write_text("engine")
    (bins / "libkite_cuda.so").write_text("module")
    b = BuildResult("default", str(bins), str(bins / "kite"), str(bins / "libkite_cuda.so"),
                    PartResult("prebuilt"), PartResult("skipped"))
    return runner.Context(cfg=load_config(root), report_dir=tmp / "report", probes=Probes(gpu_info=lambda: None),
                          ensure_build=lambda name: b, model_path=lambda spec: root / "models" / "tiny.gguf",
                          progress=lambda s: None)


def git(root: Path, *args: str) -> str:
    """git -C root ARGS under a fixed author, its output stripped; an error raises."""
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.org", GIT_COMMITTER_NAME="t",
               GIT_COMMITTER_EMAIL="t@example.org")
    return subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True, text=True,
                          env=env).stdout.strip()


def register_command(text: str) -> list[str]:
    """The first backquoted `... register ...` command of a hint in text, as argv."""
    m = re.search(r"`([^`]* register [^`]*)`", text)
    assert m, text
    return shlex.split(m.group(1))


def alive(pid: int) -> bool:
    """Whether process pid runs (a zombie, ended but not reaped, does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def write_engine(folder: Path, forced_env: dict[str, str] | None = None, module: dict | None = None) -> Path:
    """An executable `kite` (the fake engine) in folder, plus a simulated module when given."""
    folder.mkdir(parents=True, exist_ok=True)
    src = FAKE.read_text().split("\n", 1)[1]
    pre = f"#!{sys.executable}\nimport os\nos.environ.update({json.dumps(forced_env or {})})\n"
    exe = folder / "kite"
    exe.write_text(pre + src)
    exe.chmod(0o755)
    if module is not None:
        (folder / "libkite_cuda.so").write_text(json.dumps(module))
    tm = folder / "testmods"
    tm.mkdir(exist_ok=True)
    (tm / "libkite_cuda_noexport.so").write_text(json.dumps({"abi": 1, "missing": "kcuda_step_m"}))
    (tm / "libkite_cuda_badabi.so").write_text(json.dumps({"abi": 2}))
    return exe


@dataclass
class FakeRepo:
    root: Path

    @property
    def reports(self) -> Path:
        return self.root / "reports"

    @property
    def registry(self) -> Path:
        return self.root / "regressions" / "registry.lock"

    def config(self):
        from harness.contract.config import load_config

        return load_config(self.root)

    def criteria(self, text: str, name: str = "suite.yaml") -> Path:
        p = self.root / "regressions" / name
        p.write_text(textwrap.dedent(text))
        return p

    def register(self, *files: Path) -> None:
        """As `harness register` does: a register line and a depends line per criterion."""
        from harness.contract import registry
        from harness.contract.depends import dependency_digests
        from harness.verify import load_criteria

        cfg = self.config()
        known = registry.current(registry.load(self.registry)) if self.registry.exists() else {}
        crits = [c for c in load_criteria(cfg, list(files)) if c.id not in known]  # the tool skips these
        registry.append(self.registry, [(c, "register", "") for c in crits],
                        deps=[(c, dependency_digests(cfg, c)) for c in crits])

    def verify(self, *extra: str, gpu: bool | None = False, messages: list[str] | None = None) -> int:
        """Run verify in-process; gpu=None leaves the GPU probe to the engine."""
        from harness.cli import _verify_opts, make_parser
        from harness.verify import verify

        args = make_parser().parse_args(["--root", str(self.root), "verify", *extra])
        cfg = self.config()
        opts = _verify_opts(args, cfg)
        if gpu is not None:
            opts.probe_overrides["gpu"] = (True, "fake GPU") if gpu else (False, "no GPU: planted for the test")
        sink = messages if messages is not None else []
        return verify(cfg, opts, sink.append)

    def newest(self) -> Path:
        """The newest report folder (reports/latest names only a finished full run). Two runs of
        two commits within one second share the time in their names, so the order is the folder's
        last change, then its name."""
        folders = sorted((d for d in self.reports.glob("2*") if d.is_dir() and not d.is_symlink()),
                         key=lambda d: (d.stat().st_mtime_ns, d.name))
        return folders[-1] if folders else self.reports / "none-yet"

    def report(self) -> dict:
        return json.loads((self.newest() / "report.json").read_text())

    def result(self, cid: str) -> dict:
        for r in self.report()["results"]:
            if r["id"] == cid:
                return r
        raise KeyError(cid)


@pytest.fixture
def fake_repo(tmp_path: Path) -> FakeRepo:
    root = tmp_path / "repo"
    (root / "configs").mkdir(parents=True)
    (root / "configs" / "engine.yaml").write_text(ENGINE_YAML)
    (root / "regressions").mkdir()
    (root / "models").mkdir()
    (root / "models" / "tiny.gguf").write_bytes(b"GGUF fake model")
    write_engine(root / "fakebin" / "default", module={"abi": 1, "device": False})
    write_engine(root / "fakebin" / "stub", forced_env={"FAKE_STUB": "1"})
    write_engine(root / "fakebin" / "gpu", module={"abi": 1, "device": True})
    return FakeRepo(root)
