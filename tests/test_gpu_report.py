"""scripts/gpu-report.sh without a GPU: python3 is a fake on PATH that writes a run folder as
`harness verify` does. The run folders (thousands of files on a real run) go where
KITE_REPORT_RUNS says, and OUTDIR keeps only the report, so that a machine that returns a bounded
number of files still returns it."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

FAKE_PYTHON = """#!/usr/bin/env bash
# verify --reports DIR: a run folder with its report and many logs, as the harness leaves them
prev=""
for a in "$@"; do
  if [ "$prev" = --reports ]; then
    run="$a/20261205T000000Z-fake"; mkdir -p "$run/logs"
    echo "# kite verify report" > "$run/report.md"; echo '{}' > "$run/report.json"; echo '<x/>' > "$run/junit.xml"
    for i in $(seq 1 50); do echo log > "$run/logs/$i.txt"; done
  fi
  prev="$a"
done
echo "1 passed, 0 failed, 0 skipped"
"""


def run_report(tmp_path: Path, runs: Path | None) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "python3"
    fake.write_text(FAKE_PYTHON)
    fake.chmod(0o755)
    out = tmp_path / "out"
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "KITE_REPORT_STEPS": "suites"}
    if runs is not None:
        env["KITE_REPORT_RUNS"] = str(runs)
    res = subprocess.run(["bash", str(REPO / "scripts" / "gpu-report.sh"), str(out), "--no-build"], env=env,
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    return out


def test_run_folders_go_where_kite_report_runs_says(tmp_path):
    runs = tmp_path / "runs-elsewhere"
    out = run_report(tmp_path, runs)
    assert (out / "report.md").read_text().startswith("# kite verify report")
    assert (out / "report.json").is_file() and (out / "junit.xml").is_file() and (out / "verify.log").is_file()
    assert not (out / "runs").exists()
    assert (runs / "runs" / "20261205T000000Z-fake" / "report.md").is_file()


def test_without_it_the_run_folders_stay_under_outdir(tmp_path):
    out = run_report(tmp_path, None)
    assert (out / "report.md").is_file()
    assert (out / "runs" / "20261205T000000Z-fake" / "logs").is_dir()


def test_each_step_run_says_when_it_ended_and_no_build_skips_every_build(tmp_path):
    """steps.log names the steps that ran, in order; --no-build leaves out kite's build and both
    of llama.cpp's even where KITE_REPORT_STEPS names them."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "python3"
    fake.write_text(FAKE_PYTHON)
    fake.chmod(0o755)
    steps = "build build-llamacpp-cuda build-llamacpp suites"
    for args, ran in ((["--no-build"], ["suites"]), ([], steps.split())):
        out = tmp_path / f"out{len(args)}"
        env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "KITE_REPORT_STEPS": steps,
               "KITE_REPORT_RUNS": str(tmp_path / f"runs{len(args)}")}
        res = subprocess.run(["bash", str(REPO / "scripts" / "gpu-report.sh"), str(out), *args], env=env,
                             capture_output=True, text=True, timeout=120)
        assert res.returncode == 0, res.stdout + res.stderr
        lines = (out / "steps.log").read_text().splitlines()
        assert [line.split(":")[0] for line in lines] == ran
        assert all(": exit 0 at " in line for line in lines)


FAKE_TIMEOUT = """#!/usr/bin/env bash
# timeout SECONDS scripts/gpu-sanitize.sh OUTDIR/sanitize: waits (up to 30 s) for llama.cpp's CPU
# build to end first, which it can only do when it runs beside the builds; anything else runs as is
if [ "$2" = scripts/gpu-sanitize.sh ]; then
  for _ in $(seq 1 300); do grep -q '^build-llamacpp:' "$(dirname "$3")/steps.log" 2>/dev/null && break; sleep 0.1; done
  exit 0
fi
exec REAL_TIMEOUT "$@"
"""


def test_the_sanitizers_run_beside_llamacpps_builds_and_end_before_the_suites(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, text in (("python3", FAKE_PYTHON),
                       ("timeout", FAKE_TIMEOUT.replace("REAL_TIMEOUT", shutil.which("timeout")))):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    out = tmp_path / "out"
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}",
           "KITE_REPORT_STEPS": "build sanitize build-llamacpp-cuda build-llamacpp suites",
           "KITE_REPORT_RUNS": str(tmp_path / "runs")}
    res = subprocess.run(["bash", str(REPO / "scripts" / "gpu-report.sh"), str(out)], env=env,
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    ended = [line.split(":")[0] for line in (out / "steps.log").read_text().splitlines()]
    assert ended == ["build", "build-llamacpp-cuda", "build-llamacpp", "sanitize", "suites"]
