"""The one registry gate that every command passes (verify, the matrix, merge, compare, bisect,
register): registry.lock read only when it can be trusted, and each criterion judged against it
with its dependencies (model recipe, build entries) in one place.

Trusted means: the file is a regular file of the project, not a link (a linked registry escaped
the committed check and let `register` write elsewhere); every commit's registry keeps each line
of its parents' registries, in order (the history is append-only: a line removed in one commit
and an edited version registered in the next is refused); and the working file is git HEAD's
plus appended lines. Only `amend` and `withdraw` lines change a claim, and they are appended too.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from harness.errors import HarnessError
from harness.contract import depends, inputs, provenance, registry
from harness.contract.config import Config
from harness.contract.criteria import Criterion

# (parent blob, child blob) -> the first parent line the child lost, or None: git blobs never
# change, so a pair is checked once per process however many commands or commits share it
_EDGES: dict[tuple[str, str], str | None] = {}


def default_path(root: Path) -> Path:
    return root / "regressions" / "registry.lock"


def lost_line(parent: str, child: str) -> str | None:
    """The first line of parent that child does not keep in order (None: parent's lines are a
    subsequence of child's, as when lines were appended, or two branches' appends merged)."""
    kept = iter(child.split("\n"))
    return next((line for line in parent.split("\n") if line and line not in kept), None)


def history_problem(root: Path, path: Path) -> str | None:
    """Why the committed history of path is not append-only, or None (it is, or there is no git
    history to read). Each commit is held against each of its parents."""
    hist = provenance.file_history(root, path)
    if hist is None:
        return None
    for commit, parent, pblob, cblob in hist.edges:
        key = (pblob, cblob)
        if key not in _EDGES:
            _EDGES[key] = lost_line(hist.text(pblob), hist.text(cblob) if cblob else "")
        lost = _EDGES[key]
        if lost is not None:
            shown = lost if len(lost) <= 120 else lost[:117] + "..."
            return (f"registry.lock: commit {commit[:10]} drops or edits a line that its parent {parent[:10]} "
                    f"committed ({shown!r}): the registry is append-only over its whole history, so a "
                    "committed line never changes or goes (a change is an `amend` line, a retirement a "
                    "`withdraw` line); rewrite that commit so that it keeps every line")
    return None


def _refuse_link(root: Path, path: Path) -> None:
    """A registry that is a link, or lies outside the project, is refused: git's committed lines
    would not be the ones read, and `register` would write through it."""
    if path.is_symlink():
        raise HarnessError(f"{path}: registry.lock is a symbolic link (to {path.resolve()}); the registry "
                           "is a regular file of the project, so that git holds what is read and written")
    try:
        inside = path.resolve().is_relative_to(root.resolve())
    except (OSError, RuntimeError):
        inside = False
    if not inside and path.parent.resolve() != path.parent.absolute():
        raise HarnessError(f"{path}: registry.lock lies outside the project {root} through a linked folder")


def load(root: Path, path: Path | None = None) -> list[registry.Entry]:
    """registry.lock's entries, after the checks above (HarnessError naming the line or commit)."""
    path = path or default_path(root)
    _refuse_link(root, path)
    entries = registry.load(path)
    if not entries and not path.exists():
        return entries
    committed = provenance.committed_text(root, path)
    if committed is not None:
        why = registry.prefix_problem(committed, inputs.read_text(path, inputs.MAX_REGISTRY, "registry.lock"))
        if why:
            raise HarnessError(why)
        why = history_problem(root, path)
        if why:
            raise HarnessError(why)
    return entries


@dataclass
class Gate:
    """A checked registry and how each criterion stands against it. cfg: the project's
    configuration, for the dependency digests a registration recorded (None: not checked)."""
    entries: list[registry.Entry]
    root: Path | None = None
    cfg: Config | None = None
    suspect: dict[str, str] = field(default_factory=dict)

    def status(self, c: registry.Registrable, taken: set[str] | None = None,
               deps: dict[str, str] | None = None) -> registry.Status:
        """c's standing: its digest and, for a criterion, what it depends on now (deps, when the
        caller has them)."""
        if deps is None and self.cfg is not None and isinstance(c, Criterion):
            deps = depends.dependency_digests(self.cfg, c)
        return registry.status(self.entries, c, deps, self.suspect, root=self.root, taken=taken)  # type: ignore[arg-type]

    def deps(self, c: Criterion) -> dict[str, str]:
        return depends.dependency_digests(self.cfg, c) if self.cfg is not None else {}

    def withdrawn(self, uncommitted: set[int] | None = None) -> dict[str, registry.Entry]:
        """id -> its withdraw line; with uncommitted (line numbers in no commit, for --strict) a
        withdrawal not committed yet does not count: the id is still answered for."""
        return {i: e for i, e in registry.withdrawn(self.entries).items()
                if not uncommitted or e.line not in uncommitted}


def open_gate(root: Path, path: Path | None = None, cfg: Config | None = None) -> Gate:
    """The gate of root's registry (path: another registry file, `--registry`)."""
    entries = load(root, path)
    return Gate(entries, root, cfg, registry.problems(entries))
