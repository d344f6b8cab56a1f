"""scripts/gpu-ablation.sh (probe P8's one-call run) without a GPU: the script runs in a copy of
itself under a scratch tree, with stand-ins for python3, cmake and nvidia-smi on PATH and a fake
engine. It must run its steps in order, pass the ablation module and the model to
bench/pass_ablation.py, and leave in OUTDIR only the few files a machine that returns few files
returns, with the logs packed."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

FAKE_PYTHON = r"""#!/usr/bin/env bash
# python3 as gpu-ablation.sh calls it; each call is logged
echo "python3 $*" >> "$FAKE_LOG"
case "$1 $2 $3" in
  "-c import gguf "*) exit 0 ;;
  "-m harness build"*) echo built; exit 0 ;;
  "-m harness models") mkdir -p models; : > models/qwen35-0.8b-q8_0-x.gguf; echo "$PWD/models/qwen35-0.8b-q8_0-x.gguf"; exit 0 ;;
esac
if [ "$1" = bench/pass_ablation.py ]; then
  md= js= prev=
  for a in "$@"; do [ "$prev" = --md ] && md=$a; [ "$prev" = --json ] && js=$a; prev=$a; done
  echo "| norm | 49 | saving |" > "$md"; echo '{}' > "$js"; echo "round 1 all: 700 us"; exit 0
fi
if [ "$1" = bench/pass_timeline.py ]; then echo "Steps: 60; span of a step, median: 700 us"; exit 0; fi
exit 3
"""
FAKE_CMAKE = """#!/usr/bin/env bash
# each call logged; the configure step makes the output folder, as CMake does
echo "cmake $*" >> "$FAKE_LOG"
for a in "$@"; do case "$a" in -DKITE_OUTPUT_DIR=*) mkdir -p "${a#-DKITE_OUTPUT_DIR=}" ;; esac; done
"""
FAKE_KITE = """#!/usr/bin/env bash
echo "kite $* KITE_CUDA_TIMELINE=$KITE_CUDA_TIMELINE" >> "$FAKE_LOG"
echo "0 0 embed 1 1 1 256 0 0 1 2 3" >> "$KITE_CUDA_TIMELINE"
"""


def _exe(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)


@pytest.fixture
def scratch(tmp_path: Path) -> tuple[Path, dict[str, str], Path]:
    if shutil.which("bash") is None or sys.platform == "win32":
        pytest.skip("gpu-ablation.sh is a bash script")
    tree = tmp_path / "tree"
    (tree / "scripts").mkdir(parents=True)
    for script in ("gpu-ablation.sh", "gpu-wheel.sh", "gpu-module.sh"):
        shutil.copy2(REPO / "scripts" / script, tree / "scripts")
    _exe(tree / "build" / "default" / "bin" / "kite", FAKE_KITE)
    fake = tmp_path / "fakebin"
    _exe(fake / "python3", FAKE_PYTHON)
    _exe(fake / "cmake", FAKE_CMAKE)
    _exe(fake / "nvidia-smi", "#!/usr/bin/env bash\necho 'NVIDIA H200, 580.0, 1980 MHz, 3201 MHz'\n")
    log = tmp_path / "calls.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith("KITE_")}
    env.update(PATH=f"{fake}{os.pathsep}{env['PATH']}", FAKE_LOG=str(log), KITE_ABLATION_ROUNDS="3",
               KITE_ABLATION_WORK=str(tmp_path / "work"))
    return tree, env, log


def test_one_call_runs_every_step_and_keeps_few_files(scratch):
    tree, env, log = scratch
    out = tree.parent / "out"
    res = subprocess.run(["bash", str(tree / "scripts" / "gpu-ablation.sh"), str(out)], env=env, capture_output=True,
                         text=True, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    assert sorted(p.name for p in out.iterdir()) == ["ablation.json", "ablation.md", "logs.tgz", "summary.md",
                                                     "timeline.md"]
    calls = log.read_text().splitlines()
    ablation = next(c for c in calls if "bench/pass_ablation.py" in c)
    assert "--module build/ablation/bin/libkite_cuda.so" in ablation and "--rounds 3" in ablation
    assert f"--model {tree}/models/qwen35-0.8b-q8_0-x.gguf" in ablation
    assert any(c.startswith("cmake -S native/cuda -B build/ablation/cuda") and "-DKITE_CUDA_ABLATION=ON" in c
               for c in calls)
    assert any("-DKITE_CUDA_TIMELINE=ON" in c for c in calls)
    # the timeline as gpu-report.sh reads it (timeline_layers): a 64-token prompt, 64 steps
    prompt = ",".join(str(i) for i in range(1, 65))
    assert any(c.startswith("kite run") and f"--prompt {prompt} --steps 64" in c for c in calls)
    summary = (out / "summary.md").read_text()
    for line in ("- device: NVIDIA H200", "- build (this tree): exit 0", "- ablation module: exit 0; timeline module: exit 0; "
                 "model models/qwen35-0.8b-q8_0-x.gguf", "- ablation: exit 0", "| norm | 49 | saving |", "- timeline: exit 0",
                 "Steps: 60", "- done at"):
        assert line in summary, line
    with tarfile.open(out / "logs.tgz") as tar:
        assert {Path(n).name for n in tar.getnames()} >= {"ablation.log", "build.log", "timeline-run.log"}


def test_timeline_layers_reads_only_its_own_decode(scratch):
    """scripts/gpu-module.sh's timeline_layers, which gpu-report.sh, gpu-step.sh, gpu-nsys.sh and
    gpu-ablation.sh call: the module appends to KITE_CUDA_TIMELINE's file, so a steps.txt left in a
    reused WORKDIR must not reach the reading."""
    tree, env, log = scratch
    work = tree.parent / "reused"
    work.mkdir()
    (work / "steps.txt").write_text("stale line of an earlier decode\n")
    (tree / "build" / "timeline" / "bin").mkdir(parents=True)
    script = f'. scripts/gpu-module.sh && timeline_layers model.gguf "{work}" 0 "{work}/timeline.md"'
    res = subprocess.run(["bash", "-c", script], cwd=tree, env=env, capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stdout + res.stderr
    assert (work / "steps.txt").read_text() == "0 0 embed 1 1 1 256 0 0 1 2 3\n"
    assert "Steps: 60" in (work / "timeline.md").read_text()


def test_the_gguf_wheel_is_installed_only_where_python_lacks_it(tmp_path):
    """scripts/gpu-wheel.sh, which gpu-ablation.sh and gpu-step.sh source: pip installs the wheel of
    .whl/ under /tmp/site and puts it on PYTHONPATH when `import gguf` fails, and does nothing when
    it works."""
    if shutil.which("bash") is None or sys.platform == "win32":
        pytest.skip("a bash script")
    (tmp_path / ".whl").mkdir()
    (tmp_path / ".whl" / "gguf-0.19.0-py3-none-any.whl").write_bytes(b"")
    (tmp_path / "scripts").mkdir()
    shutil.copy2(REPO / "scripts" / "gpu-wheel.sh", tmp_path / "scripts")
    fake = tmp_path / "fakebin"
    _exe(fake / "python3", '#!/usr/bin/env bash\necho "python3 $*" >> "$FAKE_LOG"\n'
                           '[ "$1 $2" = "-c import gguf" ] && exit "$GGUF_MISSING"\nexit 0\n')
    for missing in ("1", "0"):
        log = tmp_path / f"calls-{missing}.log"
        env = {**os.environ, "PATH": f"{fake}{os.pathsep}{os.environ['PATH']}", "FAKE_LOG": str(log),
               "GGUF_MISSING": missing, "PYTHONPATH": "/elsewhere"}
        res = subprocess.run(["bash", "-c", '. scripts/gpu-wheel.sh && gguf_from_wheel pip.log && echo "$PYTHONPATH"'],
                             cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
        assert res.returncode == 0, res.stderr
        pip = [c for c in log.read_text().splitlines() if " -m pip install " in c]
        if missing == "1":
            assert res.stdout.strip() == "/tmp/site:/elsewhere"
            assert len(pip) == 1 and "--no-index" in pip[0] and pip[0].endswith(".whl/gguf-0.19.0-py3-none-any.whl")
        else:
            assert res.stdout.strip() == "/elsewhere" and pip == []
