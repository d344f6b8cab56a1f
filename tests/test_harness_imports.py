"""The harness's import graph (read with ast, nothing imported): stages import only downward
(contract < builder < run < report < matrix/tools/history < verify/cli; errors.py, process.py,
confined.py, console.py and text.py are the base), no circle, and no function-local import of a
harness module (that only hides a circle). A function-local import of a third-party module is fine
(optional heavy dependencies)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parent.parent / "harness"

# stage of each top-level module or subpackage of harness/, bottom (0) to top
STAGES = {
    "__init__": 0, "errors": 0, "process": 0, "console": 0, "text": 0, "confined": 0,
    "contract": 1,
    "models": 2, "builder": 2,  # the inputs the runs need: model files, built programs
    "run": 3,
    "report": 4,
    "matrix": 5, "tools": 5, "history": 5, "compare": 5,
    "verify": 6,
    "cli": 7, "__main__": 8,
}


def module_name(path: Path, pkg: Path = PKG) -> str:
    rel = path.relative_to(pkg.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def stage(mod: str) -> int:
    parts = mod.split(".")
    return STAGES[parts[1] if len(parts) > 1 else "__init__"]


def imports(path: Path, pkg: Path = PKG) -> list[tuple[str, int, bool]]:
    """(harness module imported, line, inside a function) for every harness import of a file."""
    me = module_name(path, pkg)
    is_pkg = path.name == "__init__.py"
    out: list[tuple[str, int, bool]] = []

    def visit(node: ast.AST, local: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inner = local or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, ast.Import):
                out.extend((a.name, child.lineno, local) for a in child.names if a.name.split(".")[0] == "harness")
            elif isinstance(child, ast.ImportFrom):
                if child.level:  # relative: resolve against this module's package
                    base = me.split(".")[: len(me.split(".")) - child.level + (1 if is_pkg else 0)]
                    target = ".".join(base + ([child.module] if child.module else []))
                else:
                    target = child.module or ""
                if target.split(".")[0] == "harness":
                    # `from harness.x import y`: y may be a module of package harness.x
                    for a in child.names:
                        sub = f"{target}.{a.name}"
                        out.append((sub if module_path(sub, pkg) else target, child.lineno, local))
            visit(child, inner)

    visit(ast.parse(path.read_text(encoding="utf-8"), str(path)), False)
    return out


def module_path(mod: str, pkg: Path = PKG) -> Path | None:
    base = pkg.parent.joinpath(*mod.split("."))
    for p in (base.with_suffix(".py"), base / "__init__.py"):
        if p.is_file():
            return p
    return None


def graph(pkg: Path = PKG) -> tuple[dict[str, set[str]], list[str]]:
    """Module -> harness modules it imports at module level; problems found on the way."""
    edges: dict[str, set[str]] = {}
    problems: list[str] = []
    for f in sorted(pkg.rglob("*.py")):
        me = module_name(f, pkg)
        edges.setdefault(me, set())
        for target, line, local in imports(f, pkg):
            where = f"{f.relative_to(pkg.parent)}:{line}"
            if local:
                problems.append(f"{where}: function-local import of {target} (import it at the top)")
                continue
            if target == me:
                continue
            edges[me].add(target)
            if target.split(".")[1:2] and stage(target) > stage(me):
                problems.append(f"{where}: {me} (stage {stage(me)}) imports {target} (stage {stage(target)}) "
                                "from a higher stage")
    return edges, problems


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Every circle of the graph, once (Tarjan's strongly connected components of size > 1)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def strong(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1 or v in edges.get(v, ()):
                out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            strong(v)
    return out


def test_every_module_has_a_stage():
    for f in PKG.rglob("*.py"):
        stage(module_name(f))  # KeyError: a new top-level module needs a stage in STAGES


def test_no_upward_or_function_local_import():
    _, problems = graph()
    assert not problems, "\n".join(problems)


def test_no_import_circle():
    edges, _ = graph()
    assert not cycles(edges)


# ---- the checks themselves can fail -----------------------------------------------------------

def fake_package(tmp_path: Path, files: dict[str, str]) -> Path:
    pkg = tmp_path / "harness"
    for name, text in {"__init__.py": "", "contract/__init__.py": "", "run/__init__.py": "", **files}.items():
        (pkg / name).parent.mkdir(parents=True, exist_ok=True)
        (pkg / name).write_text(text)
    return pkg


@pytest.mark.parametrize("files, needle", [
    ({"contract/a.py": "from harness.run import b\n", "run/b.py": ""}, "from a higher stage"),
    ({"run/b.py": "def f():\n    from harness.contract import a\n", "contract/a.py": ""}, "function-local import"),
    ({"contract/a.py": "def f():\n    import harness.run.b\n", "run/b.py": ""}, "function-local import"),
])
def test_checker_finds_planted_problems(tmp_path, files, needle):
    _, problems = graph(fake_package(tmp_path, files))
    assert any(needle in p for p in problems), problems


def test_checker_finds_a_planted_circle(tmp_path):
    pkg = fake_package(tmp_path, {"run/a.py": "from harness.run import b\n", "run/b.py": "from . import a\n"})
    edges, problems = graph(pkg)
    assert not problems and cycles(edges) == [["harness.run.a", "harness.run.b"]]


def test_lazy_third_party_import_is_allowed(tmp_path):
    pkg = fake_package(tmp_path, {"run/a.py": "def f():\n    import torch  # lazy: optional, heavy\n"})
    assert graph(pkg) == ({"harness": set(), "harness.contract": set(), "harness.run": set(), "harness.run.a": set()}, [])
