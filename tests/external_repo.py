"""A synthetic external source and a kite project whose adapter links it, for `compare` and `bisect`
with `--external syn=REPO` (tests/test_compare_external.py). The source is a small C library, syn
(syn.h, syn.c, util.c), with a history that plants each kind of change:

    s0 base                      s6 API change: syn_values takes a flag (the adapter breaks)
    s1 refactor (identical)      s7 API restored
    s2 notes                     s8 element 7 one ULP up (inside NMSE 1e-10)
    s3 does not build            s9 element 7 + 1 (NMSE 1.2e-8: beyond)
    s4 the build fixed           s10 notes
    s5 planted slowdown: 12 % more work per element

The timing metric is the library's own count of loop iterations: deterministic, so no verdict can
flip by chance. The kite project has two workloads on the same run: W1 bytes within NMSE 1e-10,
W2 bytes same."""

from __future__ import annotations

from pathlib import Path

from tests.compare_repo import ENGINE_YAML as BASE_ENGINE_YAML
from tests.compare_repo import SOURCE as ENGINE_SOURCE
from tests.compare_repo import WORKLOADS as BASE_WORKLOADS
from tests.compare_repo import git

HEADER = """/* syn: values[i] = i * 0.5 after a busy loop of WORK iterations per element */
int syn_values(long n, float *values, unsigned long *ops@FLAG@);
long syn_clamp(long n);
"""

SOURCE = r"""#include "syn.h"
#define WORK @WORK@
int syn_values(long @N@, float *values, unsigned long *ops@FLAG@) {
    volatile unsigned long sink = 0;
    unsigned long count = 0;
    for (long i = 0; i < @N@; i++) {
        for (long k = 0; k < WORK; k++) { sink += (unsigned long)(i ^ k); count++; }
        values[i] = (float)i * 0.5f@CHANGE@;
    }
    *ops = count;
    return 0;
}
"""

UTIL = """#include "syn.h"
long syn_clamp(long n) { return n < 0 ? 0 : n > 1000000 ? 1000000 : n; }
"""

LIB_CMAKE = """add_library(syn STATIC syn.c util.c)
target_include_directories(syn PUBLIC ${CMAKE_CURRENT_SOURCE_DIR})
"""

ADAPTER_HEAD = r"""/* eng run N [--out DIR] [--json]: syn's values as a dump, its op count as the timing */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "syn.h"

int main(int argc, char **argv) {
    if (argc < 3 || strcmp(argv[1], "run") != 0) { fprintf(stderr, "usage: eng run N\n"); return 2; }
    long n = syn_clamp(strtol(argv[2], NULL, 10));
"""
# the options, the meta object and the dumps: as tests/compare_repo.py's engine writes them
_OPTIONS = ENGINE_SOURCE[ENGINE_SOURCE.index("    const char *out = NULL;"):ENGINE_SOURCE.index("    float *values")]
_OUTPUT = ENGINE_SOURCE[ENGINE_SOURCE.index("    char meta[256];"):].replace("@N@", "n")
ADAPTER = (ADAPTER_HEAD + _OPTIONS + """    float *values = malloc((size_t)n * sizeof(float)); /* [n] */
    unsigned long ops = 0;
    if (!values || syn_values(n, values, &ops)) return 1;
""" + _OUTPUT)

ADAPTER_CMAKE = """cmake_minimum_required(VERSION 3.16)
project(adapter C)
set(CMAKE_C_STANDARD 11)
set(SYN_SOURCE_DIR "" CACHE PATH "syn's source")
add_subdirectory("${SYN_SOURCE_DIR}" syn)
add_executable(eng eng.c)
target_link_libraries(eng PRIVATE syn)
"""

ENGINE_YAML = (BASE_ENGINE_YAML.replace("engine: {source: src}", "engine: {source: adapter, external: {SYN_SOURCE_DIR: syn}}")
               .replace("build: {dir", """external:
  syn: {pip_sdist: "syn==1.0", sha256: "0000000000000000000000000000000000000000000000000000000000000000",
        subdir: syn}
build: {dir"""))

# 72 pairs, a look every 4: the 18 looks `register` asks of a workload (harness/contract/looks.py)
WORKLOADS = """version: 1
criteria:
  - id: W1
    title: 1000 values; bytes within NMSE 1e-10, work within 2 %
    kind: compare
    args: [run, "1000"]
    dumps: [values]
    bytes: {within: {nmse: 1.0e-10}}
    metric: {field: timings.work}
    margin: 0.02
    budget: {pairs: 72}
    warmups: 0
""" + BASE_WORKLOADS.split("criteria:\n", 1)[1].replace("id: W1", "id: W2")  # bytes same

ONE_ULP = " + (i == 7 ? 0x1p-22f : 0.0f)"  # 3.5 lies in [2, 4): one ULP is 2^-22
PLUS_ONE = " + (i == 7 ? 1.0f : 0.0f)"
# subject -> (WORK, N's name, change, API flag, note, breaks)
HISTORY = [
    ("s0 base", 100, "n", "", "", "", False),
    ("s1 refactor: rename n to count_", 100, "count_", "", "", "", False),
    ("s2 notes", 100, "count_", "", "", "two", False),
    ("s3 a typo: does not build", 100, "count_", "", "", "two", True),
    ("s4 fix the build", 100, "count_", "", "", "two", False),
    ("s5 planted slowdown: 12 % more work", 112, "count_", "", "", "two", False),
    ("s6 API: syn_values takes a flag", 112, "count_", "", ", int flag", "two", False),
    ("s7 API restored", 112, "count_", "", "", "two", False),
    ("s8 element 7 one ULP up", 112, "count_", ONE_ULP, "", "two", False),
    ("s9 element 7 plus one", 112, "count_", PLUS_ONE, "", "two", False),
    ("s10 notes", 112, "count_", PLUS_ONE, "", "ten", False),
]


def make_source(repo: Path) -> list[str]:
    """The external source's repository; returns its commits, oldest first."""
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    (repo / "CMakeLists.txt").write_text(LIB_CMAKE)
    (repo / "util.c").write_text(UTIL)
    commits = []
    for subject, work, name, change, flag, note, breaks in HISTORY:
        text = SOURCE.replace("@WORK@", str(work)).replace("@N@", name).replace("@CHANGE@", change)
        (repo / "syn.c").write_text(text.replace("@FLAG@", flag) + ("this is not C\n" if breaks else ""))
        (repo / "syn.h").write_text(HEADER.replace("@FLAG@", flag))
        (repo / "NOTES").write_text(note + "\n")
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", subject)
        commits.append(git(repo, "rev-parse", "HEAD"))
    return commits


def make_project(root: Path) -> Path:
    """The kite project: configs, workloads, the adapter; a git repository of one commit."""
    for d in ("configs", "regressions", "adapter"):
        (root / d).mkdir(parents=True)
    (root / "configs" / "engine.yaml").write_text(ENGINE_YAML)
    (root / "regressions" / "work.yaml").write_text(WORKLOADS)
    (root / "adapter" / "CMakeLists.txt").write_text(ADAPTER_CMAKE)
    (root / "adapter" / "eng.c").write_text(ADAPTER)
    (root / ".gitignore").write_text("build/\nreports/\n")
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "project")
    return root
