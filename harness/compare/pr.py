"""`harness pr compare` and `harness pr comment`: compare in a pull request's CI job, the steps of the
GitHub action `.github/actions/compare` (docs/COMPARE.md, "On a pull request").

`pr compare` reads the pull request from the event GitHub gives the job ($GITHUB_EVENT_PATH): its
base commit (fetched when the checkout lacks it, a shallow clone), its head, its number. It compares
the base against the checkout (HEAD: the pull request merged into its base) and writes the step's
outputs: `status`, `verdict`, `report`. `pr comment` posts the report's comment.md on the pull
request, or updates the comment it posted before, found by a hidden marker: one comment per key,
however often the job runs. It talks to GitHub through the `gh` CLI (on every hosted runner)."""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from harness.compare import cli as compare_cli
from harness.compare import report, revisions
from harness.compare.session import run_compare
from harness.errors import HarnessError
from harness.process import run_process
from harness.contract import inputs
from harness.contract.config import Config

HELP = "compare in a pull request's CI job and post its comment (the GitHub action; docs/COMPARE.md)"
EXIT = ("exit status: 0 compare passed, or the comment was posted, updated or could not be (a read-only token: "
        "a warning), 1 compare failed, 2 usage or harness error")
MARKER = "<!-- kite-compare: {key} -->"
KEY = re.compile(r"[A-Za-z0-9._-]{1,64}")
GH_TIMEOUT = 60.0


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="pr_cmd", metavar="STEP", required=True, help="compare, then comment")
    c = sub.add_parser("compare", help="compare the pull request's base with the checkout (HEAD)")
    c.add_argument("--base", default="", metavar="REV", help="base revision (default: the pull request's base commit)")
    c.add_argument("--workloads", default="", metavar="'ID ...'", help="workload ids, space-separated (default: all)")
    c.add_argument("--fail-on", choices=("any", "bytes"), default="bytes",
                   help="bytes (default: a shared runner's timing noise fails nothing) or any")
    compare_cli.add_common_arguments(c)
    c.set_defaults(out=None)
    m = sub.add_parser("comment", help="post the report's comment on the pull request, or update the one posted before")
    m.add_argument("--report", required=True, type=Path, metavar="DIR", help="the compare's report folder")
    m.add_argument("--key", default="kite-compare", help="one comment per key (default kite-compare)")
    m.add_argument("--artifact-url", default="", metavar="URL", help="where the report was uploaded")


def event(env: Mapping[str, str]) -> dict[str, Any]:
    """The pull request of the job's event; a clear error outside one."""
    path = env.get("GITHUB_EVENT_PATH", "")
    if not path:
        raise HarnessError("not in a GitHub Actions job: $GITHUB_EVENT_PATH is not set (use `compare BASE HEAD`)")
    try:
        doc = inputs.json_loads(inputs.read_text(Path(path), inputs.MAX_META, path))
    except (OSError, ValueError, inputs.FileRefused) as e:
        raise HarnessError(f"{path}: {e}") from None
    pr = doc.get("pull_request") if isinstance(doc, dict) else None
    if not isinstance(pr, dict):
        raise HarnessError(f"{path}: not a pull request event ({env.get('GITHUB_EVENT_NAME') or '?'}); "
                           "run the action `on: pull_request`")
    return pr


def _sha(pr: dict[str, Any], side: str) -> str:
    sha = (pr.get(side) or {}).get("sha")
    if not isinstance(sha, str) or not re.fullmatch(r"[0-9a-f]{40}", sha):
        raise HarnessError(f"the event's pull_request.{side}.sha is not a commit: {sha!r}")
    return sha


def ensure_commit(repo: Path, sha: str, say: Any) -> None:
    """The commit in the clone, fetched (that commit alone) when a shallow checkout lacks it."""
    have = run_process(["git", "-C", str(repo), "cat-file", "-e", f"{sha}^{{commit}}"], timeout=GH_TIMEOUT)
    if have.ok:
        return
    say(f"pr: fetching the base {sha[:10]} (the checkout lacks it)")
    got = run_process(["git", "-C", str(repo), "fetch", "--no-tags", "--depth=1", "origin", sha], timeout=600)
    if not got.ok:
        raise HarnessError(f"cannot fetch the base {sha} from origin: {got.stderr.strip() or got.describe()}")


def _output(env: Mapping[str, str], values: dict[str, str]) -> None:
    path = env.get("GITHUB_OUTPUT")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.writelines(f"{k}={v}\n" for k, v in values.items())


def run_pr_compare(args: argparse.Namespace, cfg: Config, env: Mapping[str, str] | None = None) -> int:
    env = os.environ if env is None else env
    pr = event(env)
    repo = revisions.repo_root(cfg.root)
    base = args.base or _sha(pr, "base")
    if not args.base:
        ensure_commit(repo, base, compare_cli.say)
    out = cfg.root / cfg.reports_dir / "compare-pr"
    if out.exists():
        raise HarnessError(f"{out} exists: `pr compare` runs once in a fresh checkout")
    _output(env, {"report": str(out)})  # the upload step finds the folder even when the compare fails
    args.only, args.out = args.workloads.split(), out
    opts = compare_cli.options_from(args, cfg, base, "HEAD")
    opts.bisect_bad, opts.bisect_fetch = _sha(pr, "head"), True
    out.mkdir(parents=True)
    c = run_compare(cfg, opts, out, compare_cli.say)
    links = report.links_for(env, out, cfg.root)
    report.write(c, out, args.fail_on, links)
    report.publish(c, out, args.fail_on, env, links=links)
    verdict = report.overall(c, args.fail_on)
    _output(env, {"verdict": verdict})
    compare_cli.say(f"pr: compare {verdict}; report in {out}")
    return 1 if c.failed(args.fail_on) else 0


def _gh(argv: list[str], env: Mapping[str, str]) -> Any:
    r = run_process(["gh", "api", *argv], dict(env), timeout=GH_TIMEOUT)
    if not r.ok:
        raise HarnessError(f"gh api {' '.join(argv[:3])}: {r.stderr.strip() or r.describe()}")
    return r.stdout


def with_artifact(text: str, url: str) -> str:
    """The comment with the report's artifact link on its report line (or a new one)."""
    if not url:
        return text
    link = f"[report artifact]({url})"
    lines = text.split("\n")
    for i, ln in enumerate(lines):
        if ln.startswith("- report: "):
            lines[i] = f"{ln} · {link}"
            return "\n".join(lines)
    head, sep, foot = text.rpartition("\n\n<sub>")
    return f"{head}\n- report: {link}{sep}{foot}" if sep else f"{text}\n- report: {link}\n"


def run_pr_comment(args: argparse.Namespace, env: Mapping[str, str] | None = None) -> int:
    env = os.environ if env is None else env
    if not KEY.fullmatch(args.key):
        raise HarnessError(f"--key {args.key!r}: letters, digits, '.', '_' and '-' only (at most 64)")
    pr = event(env)
    number, repo = pr.get("number"), env.get("GITHUB_REPOSITORY", "")
    if not isinstance(number, int) or not re.fullmatch(r"[\w.-]+/[\w.-]+", repo):
        raise HarnessError(f"no pull request number ({number!r}) or repository ({repo!r}) in the job's event")
    try:
        text = inputs.read_text(args.report / "comment.md", 1 << 20, "comment.md")
    except (OSError, inputs.FileRefused) as e:
        raise HarnessError(f"{args.report}/comment.md: {e}") from None
    marker = MARKER.format(key=args.key)
    body = f"{marker}\n{with_artifact(text, args.artifact_url)}"
    try:
        found = _gh(["--paginate", f"repos/{repo}/issues/{number}/comments", "--jq",
                     f'.[] | select(.body | startswith("{marker}")) | .id'], env).split()
        with tempfile.TemporaryDirectory(prefix="kite-pr-") as tmp:
            payload = Path(tmp) / "body.json"
            payload.write_text(json.dumps({"body": body}), encoding="utf-8")
            if found:
                _gh(["-X", "PATCH", f"repos/{repo}/issues/comments/{found[0]}", "--input", str(payload)], env)
                compare_cli.say(f"pr: comment {found[0]} updated on #{number}")
            else:
                _gh(["-X", "POST", f"repos/{repo}/issues/{number}/comments", "--input", str(payload)], env)
                compare_cli.say(f"pr: comment posted on #{number}")
    except HarnessError as e:  # a fork's pull request gets a read-only token: the summary has the report
        print(f"harness: warning: the comment was not posted ({e}); the step summary and the report have it "
              "(a pull request from a fork gets a read-only token)", file=sys.stderr)
    return 0
