"""`harness merge [-o OUT] DIR...`: combine report.json files into one report.

The CI fan-out runs one matrix entry (or one verify) per runner, each writing its own report
folder; merge reads them (a folder holding report.json, or the file itself), and writes one
report with the harness's own writers (report.json, report.md, junit.xml):

- results are concatenated; an id seen in two reports with different outcomes is kept twice,
  each suffixed `@<source>` (the source folder's name), so nothing is silently dropped;
- the `matrix` sections are joined (entry records, dumps), each entry's dump folder is copied
  into OUT/dumps/<entry>/<variant>/ so the comparisons can memcmp; an entry run on two machines
  keeps the first record and gains the dump variants only the other has (a GPU host's `gpu`);
- the caller may re-evaluate what depends on the merged data (the cross-entry criteria of
  configs/matrix.yaml: harness/matrix/cross.py);
- the summary is recounted; `merged_from` lists every source (started, commit, machine, counts).

Every source is checked before anything is written (what `harness report` checks, plus the matrix
section: entry and variant names are plain names, dump dirs lie inside the source's own folder),
and what merge deletes or writes stays inside OUT.

The merged report is complete only when every source is complete (not interrupted, running or
narrowed by --only) and every id the sources' criteria files hold, and every registered id of the
files they judged, has a result; anything else is `partial`, names its partial parts and exits 1.
Reports of different commits are refused.

Exit status: 0 nothing failed (skips allowed), 1 something failed or the merge is partial, 2
unreadable input or reports of different commits.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.errors import HarnessError
from harness.contract import inputs
from harness.contract.validate import ENTRY_NAME_RE
from harness.report.document import SCHEMA, Report, damage, utc_now


def _is_name(x: Any) -> bool:
    """An entry or variant name as configs/matrix.yaml allows: one plain path component."""
    return isinstance(x, str) and ENTRY_NAME_RE.fullmatch(x) is not None


def _dumps_damage(where: str, dumps: Any) -> str | None:
    """What is wrong with one matrix entry's `dumps` ({variant: {dir, files}}), or None."""
    if dumps is None:
        return None
    if not isinstance(dumps, dict):
        return f"{where}.dumps is not an object"
    for var, info in dumps.items():
        if not _is_name(var):
            return f"{where}.dumps: {var!r:.80} is not a variant name (lowercase letters, digits, _ . -)"
        if not isinstance(info, dict):
            return f"{where}.dumps.{var} is not an object"
        if not isinstance(info.get("dir"), (str, type(None))):
            return f"{where}.dumps.{var}.dir is not text"
        files = info.get("files")
        if files is not None and not (isinstance(files, dict) and all(
                isinstance(f, dict) and isinstance(f.get("sha256", ""), str) for f in files.values())):
            return f"{where}.dumps.{var}.files is not an object of {{file, bytes, sha256}} records"
    return None


def _matrix_damage(mx: Any) -> str | None:
    """What makes a report's `matrix` section unusable to merge (its names become folder names
    under the output), or None."""
    if mx is None:
        return None
    if not isinstance(mx, dict):
        return "`matrix` is not an object"
    if not isinstance(mx.get("file"), (str, type(None))):
        return "matrix.file is not text"
    sel = mx.get("selected", [])
    if not isinstance(sel, list) or not all(isinstance(x, str) for x in sel):
        return "matrix.selected is not a list of entry names"
    entries = mx.get("entries", [])
    if not isinstance(entries, list):
        return "matrix.entries is not a list"
    for i, e in enumerate(entries):
        where = f"matrix.entries[{i}]"
        if not isinstance(e, dict):
            return f"{where} is not an object"
        if not _is_name(e.get("entry")):
            shown = f"{e['entry']!r:.80}" if "entry" in e else "missing"
            return f"{where}.entry: {shown} is not an entry name (lowercase letters, digits, _ . -)"
        problem = _dumps_damage(where, e.get("dumps"))
        if problem:
            return problem
    return None


def _inside(path: Path, folder: Path) -> bool:
    """Does path, its links followed, lie strictly inside folder? (No for a path that cannot be
    resolved: a NUL byte, a loop of links.)"""
    try:
        p, f = path.resolve(), folder.resolve()
    except (OSError, ValueError, RuntimeError):
        return False
    return p != f and p.is_relative_to(f)


def _dir_escape(folder: Path, mx: dict[str, Any]) -> str | None:
    """The first dump `dir` that leads out of the report's own folder (`..`, an absolute path,
    a link), or None: merge copies those folders, and only the report's own files may come."""
    for i, e in enumerate(mx.get("entries", [])):
        for var, info in (e.get("dumps") or {}).items():
            if info.get("dir") and not _inside(folder / info["dir"], folder):
                return f"matrix.entries[{i}].dumps.{var}.dir {info['dir']!r} is not a folder inside {folder}"
    return None


def _source_damage(folder: Path, doc: dict[str, Any]) -> str | None:
    """What makes one source report unusable to merge, or None: the checks `harness report`
    makes, the fields merge itself reads, and the matrix section's names and dump folders."""
    problem = damage(doc) or _matrix_damage(doc.get("matrix"))
    if problem:
        return problem
    if not isinstance(doc.get("started"), (str, type(None))):
        return "`started` is not text"
    if not isinstance((doc.get("git") or {}).get("commit"), (str, type(None))):
        return "git.commit is not text"
    return _dir_escape(folder, doc.get("matrix") or {})


def _read(src: Path) -> tuple[Path, dict[str, Any]]:
    f = src / "report.json" if src.is_dir() else src
    try:
        doc = inputs.json_loads(inputs.read_text(f, inputs.MAX_REPORT))
    except FileNotFoundError:
        raise HarnessError(f"{src}: no report.json") from None
    except (OSError, ValueError) as e:
        raise HarnessError(f"{f}: not a readable report: {e}") from None
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA or not isinstance(doc.get("results"), list):
        raise HarnessError(f"{f}: not a kite report (schema {doc.get('schema') if isinstance(doc, dict) else '?'!r}, "
                           f"expected {SCHEMA!r})")
    problem = _source_damage(f.parent, doc)
    if problem:
        raise HarnessError(f"{f} is damaged: {problem}")
    return f.parent, doc


def _label(d: Path, doc: dict[str, Any], used: set[str]) -> str:
    sel = (doc.get("matrix") or {}).get("selected") or []
    base = "+".join(sel) if 0 < len(sel) <= 2 else d.name
    label, n = base, 1
    while label in used:
        n += 1
        label = f"{base}.{n}"
    used.add(label)
    return label


def _same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    keys = ("verdict", "reason", "digest", "kind")
    return all(a.get(k) == b.get(k) for k in keys)


def _no_links(folder: str, names: list[str]) -> list[str]:
    """copytree's ignore: symbolic links, which could bring in files from outside the source."""
    return [n for n in names if os.path.islink(os.path.join(folder, n))]


def _copy_dumps(src: Path, dst: Path, out: Path) -> None:
    """One entry variant's dump folder copied to dst; what is deleted or written stays inside out
    (a link under out that leads elsewhere, or an out inside src, is refused)."""
    if not _inside(dst, out):
        raise HarnessError(f"merge: {dst} leads outside the output folder {out} (a symbolic link?)")
    if out.resolve().is_relative_to(src.resolve()):
        raise HarnessError(f"merge: the output folder {out} is inside the dump folder {src} it copies")
    if dst.is_symlink() or dst.is_file():
        dst.unlink()
    elif dst.exists():
        shutil.rmtree(dst)
    shutil.copytree(src, dst, ignore=_no_links)


def merge_docs(sources: list[tuple[Path, dict[str, Any]]], out: Path) -> dict[str, Any]:
    """The merged report document (dump folders copied under out/dumps)."""
    used: set[str] = set()
    labelled = [(d, doc, _label(d, doc, used)) for d, doc in sources]
    merged: dict[str, Any] = {
        "schema": SCHEMA, "started": min((doc.get("started") or "" for _, doc, _ in labelled), default=utc_now()),
        "finished": None, "status": "running", "argv": sys.argv, "kind": "merged",
        "git": {}, "system": {}, "engine_info": None, "builds": {}, "criteria_files": {}, "results": [],
        "summary": {}, "merged_from": [],
    }
    for d, doc, label in labelled:
        git = doc.get("git") or {}
        sysd = doc.get("system") or {}
        merged["merged_from"].append({"source": label, "dir": str(d), "started": doc.get("started"),
                                      "finished": doc.get("finished"), "status": doc.get("status"),
                                      "commit": git.get("commit"), "dirty": git.get("dirty"),
                                      "os": sysd.get("os"), "cpu": sysd.get("cpu"),
                                      "summary": doc.get("summary") or {}})
        if not merged["git"] and git:
            merged["git"] = dict(git)
        if not merged["system"] and sysd:
            merged["system"] = dict(sysd)
        if merged["engine_info"] is None and doc.get("engine_info"):
            merged["engine_info"] = doc["engine_info"]
        for name, b in (doc.get("builds") or {}).items():
            merged["builds"].setdefault(name if name not in merged["builds"] else f"{name}@{label}", b)
        for name, v in (doc.get("criteria_files") or {}).items():
            merged["criteria_files"].setdefault(name, v)
    # results: union; an id with different outcomes in two sources is kept once per source
    by_id: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    order: list[str] = []
    for _, doc, label in labelled:
        for r in doc["results"]:
            if not isinstance(r, dict) or "id" not in r:
                continue
            if r["id"] not in by_id:
                order.append(r["id"])
                by_id[r["id"]] = []
            by_id[r["id"]].append((label, r))
    for rid in order:
        rows = by_id[rid]
        distinct: list[tuple[str, dict[str, Any]]] = []
        for label, r in rows:
            if not any(_same(r, x) for _, x in distinct):
                distinct.append((label, r))
        # a SKIP beside a real outcome of the same criterion (e.g. the GPU part on a CPU runner)
        real = [x for x in distinct if x[1].get("verdict") != "SKIP"]
        if real and len(real) < len(distinct):
            distinct = real
        if len(distinct) == 1:
            r = dict(distinct[0][1])
            r.setdefault("details", {})
            r["source"] = distinct[0][0] if len(rows) == 1 else ",".join(lbl for lbl, _ in rows)
            merged["results"].append(r)
        else:
            for label, r in distinct:
                r = dict(r)
                r["id"] = f"{rid}@{label}"
                r["source"] = label
                merged["results"].append(r)

    # matrix sections and their dumps
    entries: list[dict[str, Any]] = []
    seen: dict[str, int] = {}
    for d, doc, label in labelled:
        mx = doc.get("matrix")
        if not mx:
            continue
        merged.setdefault("matrix", {"file": mx.get("file"), "selected": [], "entries": [], "wall_s": 0.0,
                                     "wall_s_by_source": {}})
        merged["matrix"]["wall_s_by_source"][label] = mx.get("wall_s")
        for e in mx.get("entries", []):
            e = json.loads(json.dumps(e))
            first = e["entry"] not in seen
            for var, info in (e.get("dumps") or {}).items():
                src_dir = d / info["dir"] if info.get("dir") else None
                if not first and var in (entries[seen[e["entry"]]].get("dumps") or {}):
                    info["dir"] = None  # the first source's files stay
                    continue
                if src_dir is not None and src_dir.is_dir():
                    dst = out / "dumps" / e["entry"] / var
                    _copy_dumps(src_dir, dst, out)
                    info["dir"] = str(dst.relative_to(out))
                else:
                    info["dir"] = None
            e["source"] = label
            if e["entry"] in seen:
                prev = entries[seen[e["entry"]]]
                if prev.get("verdict") == "SKIP" and e.get("verdict") != "SKIP":
                    entries[seen[e["entry"]]] = e
                else:
                    # the same entry on another machine (e.g. a GPU host): keep the dump variants
                    # the first source lacks (its `gpu` dumps next to a CPU runner's `cpu` ones)
                    for var, info in (e.get("dumps") or {}).items():
                        if var not in (prev.get("dumps") or {}):
                            prev.setdefault("dumps", {})[var] = {**info, "source": label}
                    prev.setdefault("also_from", []).append(label)
                continue
            seen[e["entry"]] = len(entries)
            entries.append(e)
            merged["matrix"]["selected"].append(e["entry"])
    if "matrix" in merged:
        merged["matrix"]["entries"] = entries
        walls = [w for w in merged["matrix"]["wall_s_by_source"].values() if isinstance(w, (int, float))]
        merged["matrix"]["wall_s"] = round(sum(walls), 3)  # machine time, not elapsed time
        merged["matrix"]["wall_s_max_source"] = round(max(walls), 3) if walls else None
    return merged


def _run_identity(doc: dict[str, Any]) -> str:
    """What tells one verify run from another: its times, commit, machine and results (a copied
    report folder has the same)."""
    key = [doc.get("started"), doc.get("finished"), (doc.get("git") or {}).get("commit"), doc.get("system"),
           doc.get("results")]
    return hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()


def _refuse_repeats(dirs: list[Path], sources: list[tuple[Path, dict[str, Any]]]) -> None:
    """A run named twice (the same folder, or a copy of it) would merge into itself and hide that
    the report meant to be beside it is missing (as `reports/latest`, which a partial run leaves,
    does): an error naming both."""
    seen: dict[str, Path] = {}
    for given, (d, doc) in zip(dirs, sources, strict=True):
        keys = {f"dir:{d.resolve()}": "the same folder as", f"run:{_run_identity(doc)}": "the same run (a copy?) as"}
        for key, what in keys.items():
            if key in seen:
                raise HarnessError(f"merge: {given} is {what} {seen[key]}: name each report once")
        seen.update(dict.fromkeys(keys, Path(given)))


def _refuse_commits(dirs: list[Path], sources: list[tuple[Path, dict[str, Any]]]) -> None:
    """Reports of different commits (or one without a commit beside one with) are not one run's
    parts: the merged report could name only one commit over the other's results."""
    by: dict[str, list[str]] = {}
    for given, (_, doc) in zip(dirs, sources, strict=True):
        by.setdefault(str((doc.get("git") or {}).get("commit") or "no commit"), []).append(str(given))
    if len(by) > 1:
        raise HarnessError("merge: the reports were made from different commits: "
                           + "; ".join(f"{c[:12]} ({', '.join(d)})" for c, d in by.items())
                           + "; merge the reports of one commit")


def _partial_parts(sources: list[tuple[Path, dict[str, Any]]], labels: list[str]) -> list[str]:
    """Each source that is not a complete run, with why (its status, what stopped or narrowed it,
    what it did not run)."""
    out = []
    for (_, doc), label in zip(sources, labels, strict=True):
        not_run = [str(x) for x in doc.get("not_run") or [] if isinstance(doc.get("not_run"), list)]
        if doc.get("status") == "complete" and not not_run:
            continue
        why = [str(doc.get("status") or "no status")]
        for key in ("interrupted_by", "filter"):
            if doc.get(key):
                why.append(f"{key.replace('_', ' ')} {str(doc[key])[:200]}")
        if not_run:
            why.append(f"not run: {', '.join(not_run[:20])}" + (" ..." if len(not_run) > 20 else ""))
        out.append(f"{label}: {', '.join(why)}")
    return out


def _missing_ids(merged: dict[str, Any], sources: list[tuple[Path, dict[str, Any]]],
                 registered: dict[str, str]) -> list[str]:
    """Ids that the merged report should answer for and does not: every criterion of the files
    the verify runs loaded, and every registered id (id -> its file) of the files they judged."""
    want: set[str] = set()
    files: set[str] = set()
    for _, doc in sources:
        if doc.get("kind") == "matrix" or doc.get("matrix") is not None:  # named <entry>/<id> there
            continue
        for ids in (doc.get("criteria_files") or {}).values():
            want |= {i for i in ids if isinstance(i, str)} if isinstance(ids, list) else set()
        files |= {r["file"] for r in doc["results"] if isinstance(r, dict) and isinstance(r.get("file"), str)}
    want |= {i for i, f in registered.items() if f in files}
    present = {str(r.get("id")).split("@")[0] for r in merged["results"]}
    return sorted(want - present)


def merge(dirs: list[Path], out: Path, *, recompute: Callable[[Report], None] | None = None,
          say: Callable[[str], None] | None = None, registered: dict[str, str] | None = None) -> tuple[int, Report]:
    """Merge report folders into out. recompute: re-evaluates what depends on the merged data
    (the build matrix's cross-entry criteria), before the report is written; registered: the
    registry's ids in force (id -> file). The merged report is complete only when every source is
    complete and every id it should answer for is there; else it is partial, says which parts
    were, and the exit status is 1."""
    if not dirs:
        raise HarnessError("merge: name at least one report folder (or report.json)")
    sources = [_read(Path(d)) for d in dirs]
    _refuse_repeats(dirs, sources)
    _refuse_commits(dirs, sources)
    out.mkdir(parents=True, exist_ok=True)
    for d, _ in sources:
        if d.resolve() == out.resolve():
            raise HarnessError(f"merge: the output folder {out} is also an input")
    rep = Report(out, merge_docs(sources, out))
    if recompute is not None:
        recompute(rep)
    partial = _partial_parts(sources, [m["source"] for m in rep.doc["merged_from"]])
    missing = _missing_ids(rep.doc, sources, registered or {})
    rep.doc["partial_sources"] = partial
    rep.doc["not_run"] = missing
    complete = not partial and not missing
    rep.write(final=True, status="complete" if complete else "partial")
    s = rep.summarize()
    if say:
        say(f"merged {len(sources)} reports into {out}: {s['passed']} passed, {s['failed']} failed, "
            f"{s['skipped']} skipped" + ("" if complete else "; PARTIAL, not a complete run:"))
        for line in partial:
            say(f"  part {line}")
        if missing:
            say(f"  not answered for by any part: {', '.join(missing)}")
    return (1 if s["failed"] or not complete else 0), rep
