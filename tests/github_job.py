"""A GitHub Actions job run here, as the runner runs it, for the pull-request tests: the job's steps
in order, each `run:` step's text executed as written (bash -eo pipefail, the step's env, the
GITHUB_* files), a composite action's steps likewise with its inputs, and `${{ }}` expressions
evaluated. The few steps that reach GitHub are stood in for: `actions/checkout` fetches the pull
request's merge ref at depth 1 from the scratch repository (origin), `actions/setup-python` is the
test's own Python, `actions/upload-artifact` copies the folder and answers an artifact URL, and
`gh` (on PATH) is a fake of the comments API with its state in a JSON file.

Only what the workflows here use is understood: any other `uses:`, expression or `if:` fails the
test, so a workflow cannot drift away from what the test runs."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parent.parent
KITE_ACTION = re.compile(r"^[\w.-]+/kite/\.github/actions/compare@[0-9a-f]{40}$")
EXPR = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")

FAKE_GH = r'''#!@PYTHON@
"""gh api, the calls `harness pr comment` makes, against a JSON file ($FAKE_GH_STATE)."""
import json, os, re, sys

args = sys.argv[1:]
assert args[0] == "api", args
args = args[1:]
method, jq, body = "GET", None, None
rest = []
while args:
    a = args.pop(0)
    if a == "-X":
        method = args.pop(0)
    elif a == "--jq":
        jq = args.pop(0)
    elif a == "--input":
        body = json.load(open(args.pop(0)))["body"]
    elif a == "--paginate":
        pass
    else:
        rest.append(a)
(path,) = rest
state_file = os.environ["FAKE_GH_STATE"]
state = json.load(open(state_file)) if os.path.exists(state_file) else {"comments": [], "calls": []}
state["calls"].append([method, path])
if not os.environ.get("GH_TOKEN"):
    sys.exit("gh: no token")
m = re.fullmatch(r"repos/[\w.-]+/[\w.-]+/issues/(\d+)/comments", path)
if method == "GET" and m:
    marker = re.fullmatch(r'\.\[\] \| select\(\.body \| startswith\("(.*)"\)\) \| \.id', jq).group(1)
    for c in state["comments"]:
        if c["issue"] == int(m.group(1)) and c["body"].startswith(marker):
            print(c["id"])
elif method == "POST" and m:
    state["comments"].append({"id": 1000 + len(state["comments"]), "issue": int(m.group(1)), "body": body,
                              "updates": 0})
elif method == "PATCH":
    cid = int(re.fullmatch(r"repos/[\w.-]+/[\w.-]+/issues/comments/(\d+)", path).group(1))
    (c,) = [c for c in state["comments"] if c["id"] == cid]
    c["body"], c["updates"] = body, c["updates"] + 1
else:
    sys.exit(f"gh: unexpected call {method} {path}")
json.dump(state, open(state_file, "w"))
'''


def fake_gh(bin_dir: Path) -> Path:
    bin_dir.mkdir(parents=True, exist_ok=True)
    gh = bin_dir / "gh"
    gh.write_text(FAKE_GH.replace("@PYTHON@", sys.executable))
    gh.chmod(0o755)
    return gh


class Job:
    """One run of a workflow's job on a pull request event, in `workspace`."""

    def __init__(self, workflow: Path, job: str, workspace: Path, origin: Path, event: dict[str, Any],
                 env: dict[str, str], overrides: dict[str, str] | None = None):
        self.doc = yaml.safe_load(workflow.read_text())
        self.job = self.doc["jobs"][job]
        self.ws, self.origin, self.event = workspace, origin, event
        self.home = workspace.parent / (workspace.name + "-runner")
        self.home.mkdir(parents=True)
        (self.home / "event.json").write_text(json.dumps(event))
        self.summary = self.home / "summary.md"
        self.summary.touch()
        self.artifacts = self.home / "artifacts"
        self.env = env
        self.overrides = overrides or {}  # inputs of the kite action the test sets (install: false)
        pr = event["pull_request"]
        self.github = {"server_url": "https://github.invalid", "repository": "someone/engine", "sha": "",
                       "event_name": "pull_request", "run_id": "77", "token": "t0ken", "action_repository": "",
                       "action_ref": "", "ref": f"refs/pull/{pr['number']}/merge"}
        self.log: list[str] = []
        self.failed = False

    # ---- expressions ------------------------------------------------------------------------

    def value(self, expr: str, ctx: dict[str, Any]) -> str:
        for alt in (a.strip() for a in expr.split("||")):
            if not re.fullmatch(r"[a-z_]+(\.[\w-]+)+", alt):
                raise AssertionError(f"expression not understood by the test: {expr!r}")
            node: Any = ctx
            for part in alt.split("."):
                node = node.get(part, "") if isinstance(node, dict) else ""
            if node:
                return str(node)
        return ""

    def expand(self, text: Any, ctx: dict[str, Any]) -> str:
        return EXPR.sub(lambda m: self.value(m.group(1), ctx), str(text))

    def should_run(self, step: dict[str, Any]) -> bool:
        cond = step.get("if")
        if cond is None:
            return not self.failed
        if cond.strip() == "always()":
            return True
        raise AssertionError(f"if: not understood by the test: {cond!r}")

    # ---- steps ------------------------------------------------------------------------------

    def run(self) -> bool:
        """The job's steps; True when it succeeded."""
        ctx = {"github": self.github, "steps": {}, "env": {}}
        self.steps(self.job["steps"], ctx, action_path=None)
        return not self.failed

    def steps(self, steps: list[dict[str, Any]], ctx: dict[str, Any], action_path: Path | None) -> None:
        for step in steps:
            if not self.should_run(step):
                continue
            outputs = self.step(step, ctx, action_path)
            if "id" in step:
                ctx["steps"][step["id"]] = {"outputs": outputs}

    def step(self, step: dict[str, Any], ctx: dict[str, Any], action_path: Path | None) -> dict[str, str]:
        with_ = {k: self.expand(v, ctx) for k, v in (step.get("with") or {}).items()}
        uses = step.get("uses")
        if uses is None:
            return self.shell(step, ctx, action_path)
        if uses.startswith("actions/checkout@"):
            self.checkout()
            return {}
        if uses.startswith("actions/setup-python@"):
            return {}
        if uses.startswith("actions/upload-artifact@"):
            src = Path(with_["path"]) if with_.get("path") else None
            if src is None or not (self.ws / src).exists():
                return {}
            shutil.copytree(self.ws / src, self.artifacts / with_["name"])
            return {"artifact-url": "https://github.invalid/someone/engine/actions/runs/77/artifacts/9"}
        if KITE_ACTION.match(uses) or uses == "./.github/actions/compare":
            remote = uses.partition("/.github/")[0] if KITE_ACTION.match(uses) else ""
            self.github["action_repository"] = remote  # the runner's context inside the action
            self.github["action_ref"] = uses.rpartition("@")[2] if remote else ""
            try:
                return self.composite(REPO / ".github" / "actions" / "compare", with_, ctx)
            finally:
                self.github["action_repository"] = self.github["action_ref"] = ""
        raise AssertionError(f"uses: not stood in for by the test: {uses}")

    def checkout(self) -> None:
        pr = self.event["pull_request"]
        git = ["git", "-C", str(self.ws)]
        self.ws.mkdir(parents=True)
        subprocess.run(["git", "init", "-q", str(self.ws)], check=True)
        subprocess.run(git + ["remote", "add", "origin", self.origin.as_uri()], check=True)
        subprocess.run(git + ["fetch", "-q", "--no-tags", "--depth=1", "origin", f"refs/pull/{pr['number']}/merge"],
                       check=True)
        subprocess.run(git + ["checkout", "-q", "--detach", "FETCH_HEAD"], check=True)
        self.github["sha"] = subprocess.run(git + ["rev-parse", "HEAD"], check=True, capture_output=True,
                                            text=True).stdout.strip()

    def composite(self, path: Path, with_: dict[str, str], outer: dict[str, Any]) -> dict[str, str]:
        action = yaml.safe_load((path / "action.yml").read_text())
        assert action["runs"]["using"] == "composite"
        unknown = set(with_) - set(action["inputs"])
        assert not unknown, f"inputs the action does not take: {unknown}"
        ctx: dict[str, Any] = {"github": self.github, "steps": {}, "env": {}, "inputs": {}}
        for name, spec in action["inputs"].items():
            ctx["inputs"][name] = with_.get(name, self.expand(spec.get("default", ""), ctx))
        ctx["inputs"].update(self.overrides)
        self.steps(action["runs"]["steps"], ctx, action_path=path)
        return {k: self.expand(v["value"], ctx) for k, v in (action.get("outputs") or {}).items()}

    def shell(self, step: dict[str, Any], ctx: dict[str, Any], action_path: Path | None) -> dict[str, str]:
        out_file = self.home / f"output-{len(self.log)}"
        out_file.write_text("")
        env = {**self.env, "GITHUB_ACTIONS": "true", "CI": "true", "GITHUB_EVENT_PATH": str(self.home / "event.json"),
               "GITHUB_EVENT_NAME": "pull_request", "GITHUB_REPOSITORY": self.github["repository"],
               "GITHUB_SERVER_URL": self.github["server_url"], "GITHUB_RUN_ID": self.github["run_id"],
               "GITHUB_SHA": self.github["sha"], "GITHUB_WORKSPACE": str(self.ws),
               "GITHUB_STEP_SUMMARY": str(self.summary), "GITHUB_OUTPUT": str(out_file)}
        if action_path is not None:
            env["GITHUB_ACTION_PATH"] = str(action_path)
        env.update({k: self.expand(v, ctx) for k, v in (step.get("env") or {}).items()})
        script = self.home / f"step-{len(self.log)}.sh"
        script.write_text(self.expand(step["run"], ctx))  # the step's text, as the runner writes it
        r = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)], cwd=self.ws, env=env,
                           capture_output=True, text=True, timeout=600)
        self.log.append(f"$ {step.get('name') or step['run'].splitlines()[0]} -> {r.returncode}\n{r.stdout}{r.stderr}")
        if r.returncode:
            self.failed = True
        outputs = {}
        for line in out_file.read_text().splitlines():
            k, _, v = line.partition("=")
            outputs[k] = v
        return outputs


def job_env(bin_dir: Path, cache: Path) -> dict[str, str]:
    """The runner's environment: this Python and the fake gh first on PATH, the compare cache, and
    this checkout's harness importable (as the action's install step would make it; the test
    environment need not have it installed, e.g. nox's)."""
    keep = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "RUNNER_"))}
    path = os.pathsep.join([str(bin_dir), str(Path(sys.executable).parent), keep.get("PATH", "")])
    pythonpath = os.pathsep.join(x for x in (str(REPO), keep.get("PYTHONPATH", "")) if x)
    return {**keep, "PATH": path, "PYTHONPATH": pythonpath, "KITE_COMPARE_CACHE": str(cache), "GH_TOKEN": ""}
