"""`compare` and `bisect` over the revisions of an external source (`--external NAME=REPO`): BASE,
HEAD, GOOD and BAD name commits of REPO, a local git repository of the source that
configs/engine.yaml's `external: NAME` names (llama.cpp); kite's own tree (adapter, criteria,
registry) stays the working tree. A build that uses the source is built with REPO at the revision:

- one persistent build folder per source and build entry (ext/<name>/<build>/ in the external
  cache), fed by one persistent checkout (harness/builder/gitsource.py), so a neighbouring revision
  recompiles only the files that differ. The folder is keyed (KEY: the project's folder, its
  options, the compilers, the generator); another key empties it first, so an object built under
  other settings is never reused;
- each revision's finished binaries are kept in ext/<name>/out/<build>-<key>/, keyed by the
  revision's git tree and a fingerprint of kite's own inputs: a revision whose inputs are unchanged
  is not built again, and two revisions with the same files give the same binaries, so the
  identical-build short-circuit applies as it does for kite's own revisions;
- a build that fails says whether the adapter (kite's side) or the source itself does not build
  against the revision, with the first compiler error (a bisect skips such a revision).
Builds that do not use the source are kite's working tree: the same on both sides."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from harness.builder import gitsource
from harness.builder.cmake import BuildResult, PartResult, build, fingerprint
from harness.builder.external import cache_dir
from harness.compare import revisions
from harness.compare.revisions import Revision, stamp_doc, trusted_stamp
from harness.errors import HarnessError
from harness.contract.config import BuildSpec, Config, ProjectSpec

STAMP = "build.json"


@dataclass(frozen=True)
class External:
    name: str  # the entry of configs/engine.yaml's `external:`
    repo: Path  # a local git repository of that source

    def to_json(self) -> dict[str, str]:
        return {"name": self.name, "repo": str(self.repo)}


def parse(arg: str, cfg: Config) -> External:
    """NAME=REPO, or NAME alone when configs/engine.yaml names the source's `repo`."""
    name, sep, repo = arg.partition("=")
    if name not in cfg.external:
        raise HarnessError(f"--external {arg}: {name!r} is not an external source of configs/engine.yaml "
                           f"(external: {', '.join(cfg.external) or 'none'})")
    if not sep:
        if not cfg.external[name].repo:
            raise HarnessError(f"--external {name}: name the repository (--external {name}=REPO), or set "
                               f"`repo` under external: {name} in configs/engine.yaml")
        repo = cfg.external[name].repo
        path = Path(os.path.expanduser(repo))
        path = path if path.is_absolute() else cfg.root / path
    else:
        if not repo:
            raise HarnessError(f"--external {arg}: REPO is empty")
        path = Path(os.path.expanduser(repo))
    if not gitsource.is_repository(path):
        raise HarnessError(f"--external {arg}: {path} is not a git repository")
    revisions.resolve(path, "HEAD")  # one with a commit, or a clear error
    return External(name, path.resolve())


def projects(spec: BuildSpec) -> list[ProjectSpec]:
    return [p for p in (spec.engine, spec.module, *spec.extras) if p is not None]


def uses(cfg: Config, build_name: str, source: str) -> bool:
    return any(src == source for p in projects(cfg.builds[build_name]) for _, src in p.external)


def _digest(doc: object) -> str:
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()


def first_error(res: BuildResult) -> PartResult | None:
    parts = [res.engine, res.module, *res.extras.values()]
    return next((p for p in parts if p.status == "failed"), None)


class Builds:
    """Builds of the external source's revisions, with the same interface as revisions.Cache."""

    def __init__(self, cfg: Config, ext: External, say: Callable[[str], None], cache: Path | None = None):
        self.cfg, self.ext, self.say = cfg, ext, say
        self.cache = cache or cache_dir()  # --cache DIR, else the external sources' cache
        self.home = gitsource.folder(self.cache, ext.name)
        self.own: dict[str, BuildResult] = {}

    def resolve(self, spec: str) -> Revision:
        if spec == revisions.WORKTREE:
            raise HarnessError(f"{spec}: a revision of {self.ext.name} is a commit of {self.ext.repo}")
        return revisions.resolve(self.ext.repo, spec)

    def folder_key(self, name: str) -> dict[str, object]:
        """What a persistent build folder is keyed by: objects built under any other key are never reused."""
        spec = self.cfg.builds[name]
        return {"root": str(self.cfg.root.resolve()), "build_type": self.cfg.build_type, "generator": self.cfg.generator,
                "projects": [[p.source, p.options, list(p.inputs)] for p in projects(spec)],
                "CC": os.environ.get("CC", ""), "CXX": os.environ.get("CXX", "")}

    def revision_key(self, rev: Revision, name: str) -> str:
        """The revision's files (git tree) and kite's inputs (files, sizes, times) of the build."""
        dirs = [self.cfg.root / d for p in projects(self.cfg.builds[name]) for d in (p.source, *p.inputs)]
        return _digest({"tree": rev.tree, "kite": fingerprint(dirs, [], self.folder_key(name))})[:24]

    def build(self, rev: Revision, name: str) -> tuple[Config, BuildResult]:
        if name not in self.cfg.builds:
            raise HarnessError(f"configs/engine.yaml has no build {name!r} (builds: {', '.join(self.cfg.builds)})")
        if not uses(self.cfg, name, self.ext.name):
            if name not in self.own:  # kite's working tree: one build for both sides
                self.own[name] = build(self.cfg, name, progress=self.say)
            return self.cfg, self.own[name]
        out = self.home / "out" / f"{name}-{self.revision_key(rev, name)}"
        done = self._finished(out)
        if done is not None:
            return self.cfg, done
        fd = gitsource.lock(self.cache, self.ext.name)
        try:
            done = self._finished(out)  # another compare built it meanwhile
            if done is not None:
                return self.cfg, done
            return self.cfg, self._build(rev, name, out)
        finally:
            os.close(fd)

    def _finished(self, out: Path) -> BuildResult | None:
        return trusted_stamp(out / STAMP, [out])

    def _build(self, rev: Revision, name: str, out: Path) -> BuildResult:
        root = self.home / name
        key = json.dumps(self.folder_key(name), sort_keys=True, indent=1) + "\n"
        marker = self.home / f"{name}.KEY"
        if root.exists() and (not marker.is_file() or marker.read_text(encoding="utf-8") != key):
            self.say(f"compare: {self.ext.name}: build folder {root} was made under other settings: emptied")
            shutil.rmtree(root)
        marker.write_text(key, encoding="utf-8")
        src = self.cfg.external[self.ext.name]
        cfg = dataclasses.replace(self.cfg, build_dir=str(self.home), external={
            **self.cfg.external, self.ext.name: dataclasses.replace(src, repo=str(self.ext.repo), rev=rev.commit,
                                                        cache=str(self.cache))})
        self.say(f"compare: building {name} with {self.ext.name} {rev.label} in {root}")
        res = build(cfg, name, progress=self.say)
        failed = first_error(res)
        if failed is not None:
            failed.reason = self.why(rev, failed)
            return res
        if out.exists():
            shutil.rmtree(out)
        tmp = out.with_name(out.name + ".tmp")
        if tmp.exists():
            shutil.rmtree(tmp)
        shutil.copytree(res.bin_dir, tmp / "bin")
        moved = Path(out) / "bin"

        def at(p: str) -> str:
            return str(moved / Path(p).relative_to(res.bin_dir)) if p and Path(p).is_relative_to(res.bin_dir) else p

        res = dataclasses.replace(res, bin_dir=str(moved), engine_path=at(res.engine_path),
                                  module_path=at(res.module_path))
        os.replace(tmp, out)
        (out / (STAMP + ".tmp")).write_text(stamp_doc(res), encoding="utf-8")  # the sha256 of the files in place
        os.replace(out / (STAMP + ".tmp"), out / STAMP)
        return res

    def why(self, rev: Revision, part: PartResult) -> str:
        """Whose code does not build against the revision: kite's adapter (an error in one of kite's
        folders of the build) or the source itself; with the first compiler error."""
        if not part.errors:
            return f"{self.ext.name} {rev.label} does not build: {part.reason}"
        first = part.errors[0]
        if any(first.startswith(d.rstrip("/") + "/") for d in self._kite_folders()):
            return f"the adapter does not build against {self.ext.name} {rev.label}: {first}"
        return f"{self.ext.name} {rev.label} does not build: {first}"

    def _kite_folders(self) -> list[str]:
        return sorted({d for b in self.cfg.builds.values() for p in projects(b) for d in (p.source, *p.inputs)})
