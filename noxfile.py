"""nox sessions for kite. Thin: each calls the harness (`python -m harness ...`) or pytest.

Every session also works with `nox --no-venv` (nothing is installed then; the interpreter running
nox must already have the packages). The harness itself needs no nox: `python -m harness verify`.
"""

from __future__ import annotations

import nox

nox.options.sessions = ["verify"]
nox.options.reuse_existing_virtualenvs = True

RUNTIME = ["pyyaml>=6", "tabulate>=0.9", "psutil>=5.9", "numpy>=1.24", "gguf==0.19.*"]
TESTS = [*RUNTIME, "pytest>=7", "hypothesis>=6"]


def _install(session: nox.Session, *packages: str) -> None:
    """Install into the session's virtualenv; with --no-venv there is none, so nothing happens."""
    if session.venv_backend not in ("none", None):
        session.install(*packages)


def _harness(session: nox.Session, *args: str) -> None:
    session.run("python", "-m", "harness", *args, external=True)


@nox.session
def verify(session: nox.Session) -> None:
    """The main job: build engine and module, prepare the default model, run every registered
    suite under regressions/, write the report (reports/latest). Extra arguments go to verify."""
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
    _install(session, *TESTS)
    session.run("python", "-m", "pytest", "-q", "-m", "not timing and not llamacpp", *(session.posargs or ["tests"]),
                external=True)


@nox.session
def ab(session: nox.Session) -> None:
    """One A/B timing criterion by id: nox -s ab -- E8a"""
    if not session.posargs:
        session.error("name the criterion: nox -s ab -- ID")
    _install(session, *RUNTIME)
    _harness(session, "ab", *session.posargs)


@nox.session
def register(session: nox.Session) -> None:
    """Register criteria digests: nox -s register -- regressions/suite.yaml [--amend ID --reason TEXT]"""
    _install(session, *RUNTIME)
    _harness(session, "register", *(session.posargs or ["regressions/suite.yaml"]))


@nox.session
def lint(session: nox.Session) -> None:
    """ruff over the Python code."""
    _install(session, "ruff>=0.5")
    session.run("ruff", "check", "harness", "tests", "bench", "noxfile.py", *session.posargs, external=True)


@nox.session
def selfcheck(session: nox.Session) -> None:
    """Plant defects and show the harness catches each (tests marked `selfcheck`)."""
    _install(session, *TESTS)
    session.run("python", "-m", "pytest", "-q", "-m", "selfcheck", "tests", *session.posargs, external=True)


def _matrix_entries() -> list[str]:
    """Entry names of configs/matrix.yaml, for `nox -s "matrix(NAME)"` and `nox -l --json -s matrix`."""
    import pathlib

    try:
        import yaml

        doc = yaml.safe_load((pathlib.Path(__file__).parent / "configs" / "matrix.yaml").read_text("utf-8"))
        return [str(n) for n in ((doc or {}).get("entries") or {})]
    except Exception:  # noqa: BLE001 - a broken matrix file is reported by the session itself
        return []


MATRIX_ENTRIES = _matrix_entries()


@nox.session(tags=["matrix"])
@nox.parametrize("entry", MATRIX_ENTRIES, ids=MATRIX_ENTRIES)
def matrix(session: nox.Session, entry: str) -> None:
    """One build-matrix entry (configs/matrix.yaml); entries whose toolchain is missing SKIP with
    the install hint. Extra arguments go to `harness matrix`."""
    import pathlib
    import sys

    _install(session, *RUNTIME)
    root = pathlib.Path(__file__).parent
    sys.path.insert(0, str(root))
    from harness.matrix.spec import availability, load_matrix

    ok, why = availability(load_matrix(root / "configs" / "matrix.yaml", root).entries[entry])
    _harness(session, "matrix", entry, "--report-dir", f"reports/matrix/{entry}",
             "--merge-into", "reports/matrix-merged", *session.posargs)
    if not ok:
        session.skip(why)


@nox.session
def llamacpp(session: nox.Session) -> None:
    """llama.cpp as a second engine under kite's criteria (regressions/engines/llamacpp.yaml): fetches
    llama.cpp's source pinned by hash, builds it, runs the criteria (GPU ones SKIP without a GPU)."""
    _install(session, *TESTS)
    session.run("python", "-m", "pytest", "-q", "-m", "llamacpp", "tests", external=True)
    _harness(session, "verify", "regressions/engines/llamacpp.yaml", *session.posargs)


@nox.session
def fuzz(session: nox.Session) -> None:
    """libFuzzer over the GGUF reader and model loader (clang): nox -s fuzz -- --seconds 600"""
    _install(session, *RUNTIME)
    _harness(session, "fuzz", *(session.posargs or ["--seconds", "60"]))


@nox.session
def oracle(session: nox.Session) -> None:
    """The engine against Hugging Face transformers on random Qwen3.5 configs: `harness oracle`
    (F32 bars of the conformance tests, Q8_0 NMSE reported). Installs, in this session only, the
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
def bench(session: nox.Session) -> None:
    """The harness's own costs: start-up, comparison speed, overhead per engine run."""
    _install(session, *RUNTIME)
    session.run("python", "bench/harness_bench.py", *session.posargs, external=True)
