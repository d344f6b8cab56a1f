#!/usr/bin/env python3
"""A planted history of the pinned llama.cpp source, for `compare`/`bisect --external llama.cpp=REPO`
(issue 47; docs/COMPARE.md, "External revisions"). It makes a local git repository DEST from the
archive configs/engine.yaml pins (`external: llama.cpp`, fetched and checked as `verify` does;
`models/` left out as `omit:` says) with six commits on `main`, oldest first:

    base      the pinned tree as is
    refactor  a comment at the end of src/llama-context.cpp (no code changes)
    broken    a compile error in src/llama-context.cpp (libllama, which the adapter links)
    fix       removes it again (its tree is the refactor's)
    slow      llama_decode of one token busy-waits SLOW (default 0.20) of the time it took
    logits    qwen35's LM head scales its logits by 1 + 2^-12 (a byte change; NMSE about 6e-8)

so a bisect from base to `slow` or `logits` first meets `broken`. Author, committer and dates are
fixed, so the same DEST gets the same commit hashes. Usage (kite's root):

    python3 scripts/llamacpp_planted.py DEST [--slow 0.20]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.builder.external import fetch  # noqa: E402
from harness.contract.config import load_config  # noqa: E402

CONTEXT = "src/llama-context.cpp"
QWEN35 = "src/models/qwen35.cpp"
DECODE = "    const int ret = ctx->decode(batch);\n"
LM_HEAD = "    cur = build_lora_mm(model.output, cur, model.output_s);\n"
BREAK = "static int kite_planted_break = ;  // planted: does not compile\n"


def git(dest: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "kite planted", "GIT_AUTHOR_EMAIL": "planted@kite.invalid",
           "GIT_COMMITTER_NAME": "kite planted", "GIT_COMMITTER_EMAIL": "planted@kite.invalid",
           "GIT_AUTHOR_DATE": "2026-12-04T00:00:00Z", "GIT_COMMITTER_DATE": "2026-12-04T00:00:00Z"}
    return subprocess.run(["git", "-C", str(dest), *args], check=True, env=env, text=True,
                          stdout=subprocess.PIPE).stdout.strip()


def edit(dest: Path, rel: str, old: str, new: str) -> None:
    """Replace the one occurrence of `old` in a file (the anchor must exist exactly once)."""
    path = dest / rel
    text = path.read_text(encoding="utf-8")
    if text.count(old) != 1:
        raise SystemExit(f"{rel}: the anchor {old.strip()!r} occurs {text.count(old)} times, expected once")
    path.write_text(text.replace(old, new), encoding="utf-8")


def commit(dest: Path, subject: str) -> str:
    git(dest, "add", "--all", "--force", ".")
    git(dest, "commit", "--quiet", "--no-verify", "-m", subject)
    return git(dest, "rev-parse", "HEAD")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dest", type=Path, help="a folder that does not exist yet")
    ap.add_argument("--slow", type=float, default=0.20, help="the planted share of each one-token decode")
    a = ap.parse_args()
    if a.dest.exists():
        raise SystemExit(f"{a.dest} exists; name a new folder")
    root = Path(__file__).resolve().parents[1]
    src = load_config(root).external["llama.cpp"]
    tree = fetch(src, print)
    # the tree without models/ (omit:) and without the archive's submodule link (.git)
    shutil.copytree(tree, a.dest, symlinks=True,
                    ignore=lambda d, names: [n for n in names if Path(d) == tree and n in (*src.omit, ".git")])
    git(a.dest, "init", "--quiet", "--initial-branch=main")
    git(a.dest, "config", "core.autocrlf", "false")
    made = [("base", commit(a.dest, "base: the pinned llama.cpp source (kite's configs/engine.yaml)"))]

    ctx = (a.dest / CONTEXT).read_text(encoding="utf-8")
    (a.dest / CONTEXT).write_text(ctx + "\n// planted refactor: a comment only\n", encoding="utf-8")
    made.append(("refactor", commit(a.dest, "refactor: a comment at the end of llama-context.cpp")))

    edit(a.dest, CONTEXT, DECODE, BREAK + DECODE)
    made.append(("broken", commit(a.dest, "broken: llama-context.cpp does not compile")))
    edit(a.dest, CONTEXT, BREAK + DECODE, DECODE)
    made.append(("fix", commit(a.dest, "fix: llama-context.cpp compiles again")))

    # the wait is a share of the decode it follows, so the slowdown is the same on any machine
    spin = (f"    const int64_t kite_t0 = ggml_time_us();\n{DECODE}"
            f"    if (batch.n_tokens == 1) {{  // planted: +{a.slow:.0%} per one-token decode\n"
            f"        const int64_t kite_until = ggml_time_us() + (int64_t) ((ggml_time_us() - kite_t0) * {a.slow});\n"
            f"        while (ggml_time_us() < kite_until) {{}}\n    }}\n")
    edit(a.dest, CONTEXT, DECODE, spin)
    made.append(("slow", commit(a.dest, f"slow: a one-token llama_decode busy-waits {a.slow:.0%} longer")))

    edit(a.dest, QWEN35, LM_HEAD, LM_HEAD + "    cur = ggml_scale(ctx0, cur, 1.0f + 1.0f/4096);  // planted\n")
    made.append(("logits", commit(a.dest, "logits: qwen35's LM head scales logits by 1 + 2^-12")))

    for name, sha in made:
        print(f"{name:9} {sha}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
