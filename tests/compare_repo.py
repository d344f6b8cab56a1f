"""A temporary git repository of a small engine of its own (C, CMake) for the compare and bisect
tests, with a history that plants each kind of change:

    c0 base             c3 planted slowdown: 12 % more work per element (the metric counts it)
    c1 refactor         c4, c6, c7, c8 notes (no engine change)
    c2 notes            c5 one output value changes (element 7)

The timing metric is the engine's own count of loop iterations (a busy loop proportional to the
work, so its wall time follows too): deterministic, so no verdict can flip by chance."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

SOURCE = r"""/* eng: values[i] = i * 0.5 for i < N, after a busy loop of WORK iterations per element.
 *   eng run N [--out DIR] [--json]   DIR/values.f32, DIR/meta.json; --json: meta on stdout */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define WORK @WORK@

int main(int argc, char **argv) {
    if (argc < 3 || strcmp(argv[1], "run") != 0) { fprintf(stderr, "usage: eng run N\n"); return 2; }
    long @N@ = strtol(argv[2], NULL, 10);
    const char *out = NULL;
    int json = 0;
    for (int i = 3; i < argc; i++) {
        if (strcmp(argv[i], "--out") == 0 && i + 1 < argc) out = argv[++i];
        else if (strcmp(argv[i], "--json") == 0) json = 1;
        else { fprintf(stderr, "eng: unknown option %s\n", argv[i]); return 2; }
    }
    float *values = malloc((size_t)@N@ * sizeof(float)); /* [N] */
    volatile unsigned long sink = 0;
    unsigned long ops = 0;
    for (long i = 0; i < @N@; i++) {
        for (long k = 0; k < WORK; k++) { sink += (unsigned long)(i ^ k); ops++; }
        values[i] = (float)i * 0.5f@CHANGE@;
    }
    char meta[256];
    snprintf(meta, sizeof meta, "{\"dims\": {\"values\": [%ld]}, \"timings\": {\"work\": %lu}}\n", @N@, ops);
    if (out) {
        char path[4096];
        mkdir(out, 0755);
        snprintf(path, sizeof path, "%s/values.f32", out);
        FILE *f = fopen(path, "wb");
        if (!f || fwrite(values, sizeof(float), (size_t)@N@, f) != (size_t)@N@ || fclose(f)) return 1;
        snprintf(path, sizeof path, "%s/meta.json", out);
        f = fopen(path, "w");
        if (!f || fputs(meta, f) < 0 || fclose(f)) return 1;
    }
    if (json) fputs(meta, stdout);
    free(values);
    return 0;
}
"""

CMAKE = """cmake_minimum_required(VERSION 3.16)
project(eng C)
set(CMAKE_C_STANDARD 11)
add_executable(eng eng.c)
"""

ENGINE_YAML = """engine:
  binary: {posix: eng, windows: eng.exe}
  dumps:
    values: {file: values.f32, dtype: f32, shape: dims.values}
  meta_file: meta.json
  dump_flag: --out
  json_flag: --json
  info_args: [run, "1"]
builds:
  default:
    engine: {source: src}
build: {dir: build, build_type: Release, jobs: 1}
timeouts: {build: 300, run: 30, info: 10}
reports: {dir: reports}
"""

# 72 pairs, a look every 4: the 18 looks `register` asks of a workload (harness/contract/looks.py)
WORKLOADS = """version: 1
criteria:
  - id: W1
    title: 1000 values; bytes same, work within 2 %
    kind: compare
    args: [run, "1000"]
    dumps: [values]
    bytes: same
    metric: {field: timings.work}
    margin: 0.02
    budget: {pairs: 72}
    warmups: 0
"""

# commit -> (WORK, the variable's name for N, change to values[i], a note)
HISTORY = [
    ("c0 base", 100, "n", "", ""),
    ("c1 refactor: rename n to count", 100, "count", "", ""),
    ("c2 notes", 100, "count", "", "two"),
    ("c3 planted slowdown: 12 % more work", 112, "count", "", "two"),
    ("c4 notes", 112, "count", "", "four"),
    ("c5 change element 7", 112, "count", " + (i == 7 ? 1.0f : 0.0f)", "four"),
    ("c6 notes", 112, "count", " + (i == 7 ? 1.0f : 0.0f)", "six"),
    ("c7 notes", 112, "count", " + (i == 7 ? 1.0f : 0.0f)", "seven"),
    ("c8 notes", 112, "count", " + (i == 7 ? 1.0f : 0.0f)", "eight"),
]

GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.invalid", "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z",
           "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z", "GIT_CONFIG_GLOBAL": os.devnull,
           "GIT_CONFIG_NOSYSTEM": "1"}


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True,
                          env={**os.environ, **GIT_ENV}).stdout.strip()


def make_repo(repo: Path, extra: dict[str, str] | None = None, register: bool = False) -> list[str]:
    """The repository and its history; returns the commits, oldest first. extra: more files of the
    first commit (path -> text); register: the workloads registered in the first commit."""
    (repo / "src").mkdir(parents=True)
    (repo / "configs").mkdir()
    (repo / "regressions").mkdir()
    (repo / "configs" / "engine.yaml").write_text(ENGINE_YAML)
    (repo / "regressions" / "work.yaml").write_text(WORKLOADS)
    (repo / "src" / "CMakeLists.txt").write_text(CMAKE)
    (repo / ".gitignore").write_text("build/\nreports/\n")
    for path, text in (extra or {}).items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(text)
    git(repo, "init", "-q", "-b", "main")
    commits = []
    for subject, work, name, change, note in HISTORY:
        text = SOURCE.replace("@WORK@", str(work)).replace("@N@", name).replace("@CHANGE@", change)
        (repo / "src" / "eng.c").write_text(text)
        (repo / "NOTES").write_text(note + "\n")
        if register and not commits:
            from harness.cli import main  # noqa: PLC0415 - only a registering caller needs the harness

            for f in sorted((repo / "regressions").glob("*.yaml")):
                assert main(["--root", str(repo), "register", str(f)]) == 0
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", subject)
        commits.append(git(repo, "rev-parse", "HEAD"))
    return commits
