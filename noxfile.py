"""nox sessions for kite. Thin: each calls the harness (`python -m harness ...`) or pytest.

Every session also works with `nox --no-venv` (nothing is installed then; the interpreter running
nox must already have the packages). The harness itself needs no nox: `python -m harness verify`.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import nox

nox.options.sessions = ["verify"]
nox.options.reuse_existing_virtualenvs = True

HERE = Path(__file__).resolve().parent
# The dependencies are pyproject.toml's; nox reads it (tomllib, or tomli on Python 3.10).
PROJECT = nox.project.load_toml(HERE / "pyproject.toml")["project"]
RUNTIME = list(PROJECT["dependencies"])
TESTS = [*RUNTIME, *PROJECT["optional-dependencies"]["test"]]
LINT = list(PROJECT["optional-dependencies"]["lint"])
PLOTS = list(PROJECT["optional-dependencies"]["plots"])  # the history's pictures and change points


def _install(session: nox.Session, *packages: str) -> None:
    """Install into the session's virtualenv; with --no-venv there is none, so nothing happens."""
    if session.venv_backend not in ("none", None):
        session.install(*packages)


def _harness(session: nox.Session, *args: str) -> None:
    session.run("python", "-m", "harness", *args, external=True)


@nox.session
def verify(session: nox.Session) -> None:
    """The main job: build, prepare the model, run every registered criterion, write the report.

    Builds the engine and module, generates the default model, runs every registered suite under
    regressions/ and writes reports/latest. Extra arguments go to `harness verify`. Through nox
    every failure is exit status 1 (the harness's own 1 or 2 is in nox's log line)."""
    _install(session, *RUNTIME)
    _harness(session, "verify", *session.posargs)


@nox.session
def build(session: nox.Session) -> None:
    """Build the engine (host compiler) and the CUDA module (nvcc), separately."""
    _install(session, *RUNTIME)
    _harness(session, "build", *session.posargs)


@nox.session
def tests(session: nox.Session) -> None:
    """pytest: the harness's unit tests and the native integration tests."""
    _install(session, *TESTS, *PLOTS)
    session.run("python", "-m", "pytest", "-q", "-m", "not llamacpp", *(session.posargs or ["tests"]),
                external=True)


@nox.session
def ab(session: nox.Session) -> None:
    """One A/B timing criterion by id: nox -s ab -- A1 (A1 runs on a CPU, E8a needs a GPU)."""
    if not session.posargs:
        session.error("name the criterion: nox -s ab -- ID")
    _install(session, *RUNTIME)
    _harness(session, "ab", *session.posargs)


@nox.session
def compare(session: nox.Session) -> None:
    """Head against base, bytes and speed: nox -s compare -- BASE [HEAD] [--only ID ...] (docs/COMPARE.md)"""
    if not session.posargs:
        session.error("name the base: nox -s compare -- BASE [HEAD]")
    _install(session, *RUNTIME)
    _harness(session, "compare", *session.posargs)


@nox.session
def register(session: nox.Session) -> None:
    """Register criteria digests: nox -s register -- FILE [--amend ID --reason TEXT]."""
    _install(session, *RUNTIME)
    _harness(session, "register", *(session.posargs or ["regressions/suite.yaml"]))


@nox.session
def lint(session: nox.Session) -> None:
    """ruff over the Python code."""
    _install(session, *LINT)
    session.run("ruff", "check", "harness", "tests", "bench", "noxfile.py", *session.posargs, external=True)


@nox.session
def selfcheck(session: nox.Session) -> None:
    """Plant defects and show the harness catches each (tests marked `selfcheck`)."""
    _install(session, *TESTS)
    session.run("python", "-m", "pytest", "-q", "-m", "selfcheck", "tests", *session.posargs, external=True)


_ENTRY_KEY = re.compile(r"""(["']?)([^"'#:]+)\1\s*:""")


def matrix_entry_names(text: str) -> list[str]:
    """The keys of the top-level `entries:` block of configs/matrix.yaml, read without a YAML
    library so that nox alone lists the sessions (tests check it against the real loader). A
    broken file gives what it gives: the session itself reports the problem."""
    names: list[str] = []
    inside, indent = False, None
    for line in text.splitlines():
        body = line.rstrip()
        if not body.strip() or body.lstrip().startswith("#"):
            continue
        depth = len(body) - len(body.lstrip(" "))
        if depth == 0:
            inside, indent = body.split("#")[0].rstrip() == "entries:", None
        elif inside and (indent is None or depth == indent):
            indent = depth
            m = _ENTRY_KEY.match(body.strip())
            if m:
                names.append(m.group(2).strip())
    return names


def _read_matrix() -> list[str]:
    try:
        return matrix_entry_names((HERE / "configs" / "matrix.yaml").read_text("utf-8"))
    except (OSError, UnicodeDecodeError):
        return []


MATRIX_ENTRIES = _read_matrix()


@nox.session(tags=["matrix"])
@nox.parametrize("entry", MATRIX_ENTRIES, ids=MATRIX_ENTRIES)
def matrix(session: nox.Session, entry: str) -> None:
    """One build-matrix entry of configs/matrix.yaml (nox -t matrix: all of them).

    Entries whose toolchain is missing SKIP with the install hint. Extra arguments go to
    `harness matrix`."""
    _install(session, *RUNTIME)
    # the entry's availability, from the harness in the session's environment (stderr: the console)
    listing = session.run("python", "-m", "harness", "matrix", "--list", "--json", entry,
                          silent=True, stderr=None, external=True)
    row = json.loads(str(listing))[0]
    _harness(session, "matrix", entry, "--report-dir", f"reports/matrix/{entry}",
             "--merge-into", "reports/matrix-merged", *session.posargs)
    if not row["runnable"]:
        session.skip(row["skip_reason"])


@nox.session
def llamacpp(session: nox.Session) -> None:
    """llama.cpp as a second engine, judged by kite's criteria (regressions/engines/llamacpp.yaml).

    Fetches llama.cpp's source pinned by hash, builds the adapter and llama-bench from it, runs the
    criteria (on the CPU L1-L5, L3f and L12, the adapter against llama-bench; GPU ones SKIP without
    a GPU).
    The adapter's tests gate the session; the criteria's verdicts are findings about two engines,
    reported in reports/latest, so a FAIL verdict (exit 1) passes the session and an error (2) fails it."""
    _install(session, *TESTS)
    session.run("python", "-m", "pytest", "-q", "-m", "llamacpp", "tests", external=True)
    session.run("python", "-m", "harness", "verify", "regressions/engines/llamacpp.yaml", *session.posargs,
                external=True, success_codes=[0, 1])


@nox.session
def fuzz(session: nox.Session) -> None:
    """libFuzzer over the GGUF reader and model loader (clang): nox -s fuzz -- --seconds 600."""
    _install(session, *RUNTIME)
    _harness(session, "fuzz", *(session.posargs or ["--seconds", "60"]))


@nox.session
def oracle(session: nox.Session) -> None:
    """The engine against Hugging Face transformers on random Qwen3.5 configs (harness oracle).

    The F32 bars of the conformance tests; Q8_0 NMSE reported. Installs, in this session only, the
    optional dependencies torch 2.13.0 (CPU build wanted: pip takes a `+cpu` wheel when its index or
    find-links offer one, e.g. PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu; plain PyPI on
    Linux serves the much larger CUDA build), transformers 5.23 (has Qwen3_5ForCausalLM) and
    safetensors. Extra arguments go to `harness oracle` (e.g. -- --configs 10 --seed 3); `-- pytest`
    runs the test form instead (tests marked `oracle`)."""
    _install(session, *TESTS, "torch==2.13.0", "transformers==5.23.*", "safetensors")
    if session.posargs[:1] == ["pytest"]:
        session.run("python", "-m", "pytest", "-q", "-m", "oracle", "tests", *session.posargs[1:], external=True)
    else:
        _harness(session, "oracle", *session.posargs)


@nox.session
def mutation(session: nox.Session) -> None:
    """Mutation testing of the harness's core with mutmut (figures in docs/TESTING.md).

    Configured by [tool.mutmut] in pyproject.toml. Every mutant by default; `-- --module compare` one module; `-- --sample 40
    --seed 1 --fail-under 90` the CI subset."""
    _install(session, *TESTS, "mutmut==3.8.1")
    session.run("python", "scripts/mutation.py", *session.posargs, external=True)


@nox.session
def bench(session: nox.Session) -> None:
    """The harness's own costs: start-up, comparison speed, overhead per engine run."""
    _install(session, *RUNTIME)
    session.run("python", "bench/harness_bench.py", *session.posargs, external=True)
