"""The pull-request loop, simulated here: the workflow files pass actionlint, and a scratch engine
repository whose workflow calls kite's compare action gets, for a pull request that changes bytes
and for one that slows the engine, ONE comment with every item a reviewer needs. The job's steps
run as written (tests/github_job.py); the printed bisect command runs as printed."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.run.probes import gpu_device
from tests.compare_repo import WORKLOADS, git, make_repo
from tests.github_job import REPO, Job, fake_gh, job_env

ACTIONLINT = shutil.which("actionlint") or shutil.which("actionlint", path=str(Path(sys.executable).parent))


def actionlint(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    assert ACTIONLINT, "actionlint is not installed: pip install -e '.[dev]' (the test extra brings it)"
    # shellcheck and pyflakes off: whether a machine has them must not change the verdict
    return subprocess.run([ACTIONLINT, "-no-color", "-shellcheck=", "-pyflakes=", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120)


def test_workflows_pass_actionlint():
    """Every workflow of this repository, and the compare action through the workflow that uses it."""
    r = actionlint()
    assert r.returncode == 0, r.stdout + r.stderr


def test_actionlint_catches_a_wrong_input(tmp_path):
    """The linter reads the action: an input it does not take is an error (the check is not vacuous)."""
    shutil.copytree(REPO / ".github", tmp_path / ".github")
    wf = tmp_path / ".github" / "workflows" / "compare.yml"
    wf.write_text(wf.read_text().replace("workloads:", "workload:"))
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    r = actionlint(cwd=tmp_path)
    assert r.returncode == 1 and 'input "workload" is not defined in action "kite compare"' in r.stdout


def test_third_party_actions_are_pinned_by_commit():
    for f in [*(REPO / ".github" / "workflows").glob("*.yml"), REPO / ".github" / "actions" / "compare" / "action.yml"]:
        for ref in re.findall(r"^\s*(?:- )?uses:\s*(\S+)", f.read_text(), re.M):
            assert ref.startswith("./") or re.fullmatch(r"[\w.-]+/[\w./-]+@[0-9a-f]{40}", ref), f"{f.name}: {ref}"


SCRATCH_WORKFLOW = """name: compare
on:
  pull_request:
permissions:
  contents: read
  pull-requests: write
jobs:
  compare:
    runs-on: ubuntu-24.04
    steps:
      - uses: actions/checkout@3d3c42e5aac5ba805825da76410c181273ba90b1  # v7.0.1
      - uses: kite-project/kite/.github/actions/compare@{sha}
        with:
          workloads: W1 W2
          max-pairs: "64"
"""


# W1 again, on a GPU: it skips here, and the comment says why
GPU_WORKLOAD = WORKLOADS.replace("id: W1", "id: W2").replace("    kind: compare\n", "    kind: compare\n"
                                                                "    requires: [gpu]\n")


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    """An engine's repository (tests/compare_repo.py) whose workflow calls the action, with two pull
    requests as GitHub makes them (refs/pull/N/head and the merge ref N/merge): #1 plants the 12 %
    slowdown (c2 -> c3), #2 changes element 7 (c4 -> c5)."""
    if not (shutil.which("cmake") and shutil.which("cc")):
        pytest.fail("the scratch engine needs cmake and a C compiler (README, Install)")
    root = tmp_path_factory.mktemp("pr")
    sha = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    sha = sha if re.fullmatch(r"[0-9a-f]{40}", sha) else "0" * 40
    origin = root / "engine"
    c = make_repo(origin, {".github/workflows/compare.yml": SCRATCH_WORKFLOW.format(sha=sha),
                           "regressions/gpu.yaml": GPU_WORKLOAD}, register=True)
    for number, base, head in ((1, c[2], c[3]), (2, c[4], c[5])):
        git(origin, "checkout", "-q", "--detach", base)
        git(origin, "merge", "-q", "--no-ff", "-m", f"Merge pull request #{number}", head)
        git(origin, "update-ref", f"refs/pull/{number}/merge", "HEAD")
        git(origin, "update-ref", f"refs/pull/{number}/head", head)
    git(origin, "checkout", "-q", "main")
    bin_dir = root / "bin"
    fake_gh(bin_dir)
    return root, origin, c, job_env(bin_dir, root / "cache")


def pull_request(scratch, number: int, base: str, head: str, run: int) -> tuple[Job, bool]:
    root, origin, _, env = scratch
    event = {"action": "synchronize", "number": number,
             "pull_request": {"number": number, "base": {"sha": base, "ref": "main"}, "head": {"sha": head}}}
    env = {**env, "FAKE_GH_STATE": str(root / "github.json")}
    job = Job(origin / ".github" / "workflows" / "compare.yml", "compare", root / f"ws-{number}-{run}", origin, event,
              env, overrides={"install": "false"})  # the harness is this test's own, installed already
    return job, job.run()


def comments(scratch, number: int) -> list[dict]:
    state = json.loads((scratch[0] / "github.json").read_text())
    return [c for c in state["comments"] if c["issue"] == number]


def test_scratch_workflow_passes_actionlint(scratch):
    _, origin, _, _ = scratch
    r = actionlint(str(origin / ".github" / "workflows" / "compare.yml"), cwd=origin)
    assert r.returncode == 0, r.stdout + r.stderr


def test_slowdown_pull_request_gets_one_comment(scratch):
    _, _, c, _ = scratch
    job, ok = pull_request(scratch, 1, c[2], c[3], 1)
    assert ok, "\n".join(job.log)  # --fail-on bytes: a slowdown is reported, the job passes
    (com,) = comments(scratch, 1)
    body = com["body"]
    assert body.startswith("<!-- kite-compare: kite-compare -->\n**kite compare**")
    assert re.search(r"\[regressed\]\(https://github\.invalid/kite-project/kite/blob/[0-9a-f]{40}/docs/GLOSSARY\.md"
                     r"#regressed\)", body)
    assert "+12.0 % (slower)" in body and "machine: " in body
    assert "**PASS (speed is reported, not failed: --fail-on bytes)**" in body
    assert re.search(r"\[skipped\]\(\S+#skipped\) \(not run on this machine\): W2: ", body)
    assert gpu_device() or "W2: no GPU: no /dev/nvidia*" in body  # skipped without building to ask
    assert f"git fetch origin {c[2]} {c[3]} && python3 -m harness bisect \"$(git merge-base {c[2]} {c[3]})\" {c[3]} " \
           f"--workload W1 --what speed" in body
    assert ("[run](https://github.invalid/someone/engine/actions/runs/77) · "
            "[report artifact](https://github.invalid/someone/engine/actions/runs/77/artifacts/9)") in body
    assert "How to read this" in body
    assert "# compare" in job.summary.read_text()  # the step summary
    assert (job.artifacts / "kite-compare" / "report.json").is_file()  # the uploaded report
    # a second push: the same comment, updated
    job2, ok2 = pull_request(scratch, 1, c[2], c[3], 2)
    assert ok2, "\n".join(job2.log)
    (again,) = comments(scratch, 1)
    assert (again["id"], again["updates"]) == (com["id"], 1)


def test_byte_change_pull_request_fails_with_its_bisect(scratch, tmp_path):
    root, origin, c, env = scratch
    job, ok = pull_request(scratch, 2, c[4], c[5], 1)
    assert not ok  # changed bytes that must stay the same fail the job
    (com,) = comments(scratch, 2)
    body = com["body"]
    assert "[bytes changed](" in body and "#bytes-changed)" in body and "(must stay the same)" in body
    assert "`values`: 1 of 1000 elements differ; first at index 7: base 3.5, head 4.5; max ULP" in body
    cmd = re.search(r"```sh\n  (.*)\n  ```", body).group(1)
    assert "--what bytes" in cmd
    # the next step runs as printed, in a reviewer's clone
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", origin.as_uri(), str(clone)], check=True)
    r = subprocess.run(["bash", "-c", cmd], cwd=clone, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"first bad commit: **{c[5]}** (confirmed)" in r.stdout


def test_pr_compare_outside_a_pull_request_says_why(tmp_path, monkeypatch, capsys):
    from harness.cli import main  # noqa: PLC0415 - test-local

    monkeypatch.delenv("GITHUB_EVENT_PATH", raising=False)
    assert main(["--root", str(REPO), "pr", "compare"]) == 2
    assert "not in a GitHub Actions job: $GITHUB_EVENT_PATH is not set" in capsys.readouterr().err
    push = tmp_path / "event.json"
    push.write_text(json.dumps({"ref": "refs/heads/main"}))
    monkeypatch.setenv("GITHUB_EVENT_PATH", str(push))
    monkeypatch.setenv("GITHUB_EVENT_NAME", "push")
    assert main(["--root", str(REPO), "pr", "comment", "--report", str(tmp_path)]) == 2
    assert "not a pull request event (push); run the action `on: pull_request`" in capsys.readouterr().err
