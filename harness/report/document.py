"""Reports: report.json (canonical), report.md, junit.xml, written after every criterion,
atomically (write, then rename), so a killed run keeps what it finished."""

from __future__ import annotations

import json
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from harness import confined
from harness.errors import HarnessError
from harness.report import junit
from harness.run.result import Result, utc_now  # noqa: F401 - re-exported: the writers' input
from harness.text import printable
from harness.contract import inputs

SCHEMA = "kite-report/1"


def atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:  # the temporary opened without following a link planted under its name
        with os.fdopen(confined.open_file(path.parent, tmp.name, os.O_WRONLY | os.O_CREAT, truncate=True), "w",
                       encoding="utf-8", newline="\n") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        # disk full, read-only, interrupted: the previous file stays whole; no stray temporary
        try:
            tmp.unlink()
        except OSError:
            pass
        raise


def new_report_dir(reports: Path, short_sha: str | None) -> Path:
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    base = f"{stamp}-{short_sha or 'nogit'}"
    try:
        reports.mkdir(parents=True, exist_ok=True)
        d = reports / base
        n = 1
        while d.exists():
            n += 1
            d = reports / f"{base}.{n}"
        d.mkdir(parents=True)
    except OSError as e:
        raise HarnessError(f"cannot create a report folder under {reports}: {e.strerror or e}") from None
    return d


def point_latest(reports: Path, target: Path) -> None:
    link = reports / "latest"
    try:
        tmp = reports / f".latest.tmp{os.getpid()}"
        if tmp.is_symlink() or tmp.exists():
            tmp.unlink()
        tmp.symlink_to(target.name, target_is_directory=True)
        os.replace(tmp, link)
    except OSError:
        atomic_write(reports / "LATEST", target.name + "\n")


def resolve_latest(reports: Path) -> Path | None:
    """The folder that reports/latest (a link) or reports/LATEST (a file naming it, where links
    are not made) points at; None when neither exists. One that points nowhere is an error."""
    link = reports / "latest"
    if link.is_symlink() and not link.exists():
        raise HarnessError(f"{link} points at {os.readlink(link)}, which does not exist")
    if link.exists():
        return link.resolve()
    f = reports / "LATEST"
    if f.exists():
        name = inputs.read_text(f, 4096).strip()
        if not name or "\n" in name:
            raise HarnessError(f"{f}: must hold one report folder's name, not {name[:80]!r}")
        d = reports / name
        if not d.exists():
            raise HarnessError(f"{f} names {name}, which does not exist in {reports}")
        return d
    return None


_RESULT_STR = ("id", "title", "kind", "file", "digest", "verdict", "reason")


def _damage(doc: dict[str, Any]) -> str | None:
    """What makes a loaded report.json unusable (a hand-edited or foreign file), or None."""
    res = doc.get("results")
    if not isinstance(res, list):
        return "`results` is not a list"
    for i, r in enumerate(res):
        if not isinstance(r, dict):
            return f"results[{i}] is not an object"
        bad = [k for k in _RESULT_STR if not isinstance(r.get(k), str)]
        if bad:
            return f"results[{i}]: {', '.join(bad)} missing or not text"
        if not isinstance(r.get("duration_s", 0), (int, float)) or isinstance(r.get("duration_s"), bool):
            return f"results[{i}]: duration_s is not a number"
        if not isinstance(r.get("details", {}), dict) or not isinstance(r.get("amendments", []), list):
            return f"results[{i}]: details/amendments have the wrong type"
    for key, typ in (("builds", dict), ("resumed", list), ("git", dict), ("system", dict),
                     ("criteria_files", dict)):
        if key in doc and not isinstance(doc[key], typ):
            return f"`{key}` is not a{'n object' if typ is dict else ' list'}"
    for name, b in (doc.get("builds") or {}).items():
        if not (isinstance(b, dict) and all(isinstance(b.get(p), dict) for p in ("engine", "module"))):
            return f"builds.{name} is not a build result"
    return None


def damage(doc: dict[str, Any]) -> str | None:
    """What makes a loaded report.json unusable: a field of the wrong shape, or anything else that
    the writers cannot render; None for a usable one. `report`, `verify --resume` and `merge` read
    with it."""
    problem = _damage(doc)
    if problem is None:
        try:  # whatever else is in it must still render
            render_markdown(doc)
            render_junit(doc)
        except (TypeError, KeyError, AttributeError, ValueError, IndexError, OverflowError) as e:
            problem = f"cannot render it ({type(e).__name__}: {e})"
    return problem


class Report:
    """The report of one verify run (or of a resumed one)."""

    def __init__(self, directory: Path, doc: dict[str, Any] | None = None):
        self.dir = directory
        self.doc: dict[str, Any] = doc or {"schema": SCHEMA, "started": utc_now(), "finished": None,
                                           "status": "running", "argv": [], "git": {}, "system": {},
                                           "engine_info": None, "builds": {}, "criteria_files": {},
                                           "results": [], "summary": {}}

    @classmethod
    def load(cls, directory: Path) -> Report:
        doc = inputs.json_loads(inputs.read_text(directory / "report.json", inputs.MAX_REPORT))
        if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
            raise ValueError(f"{directory}/report.json: unknown schema "
                             f"{doc.get('schema') if isinstance(doc, dict) else type(doc).__name__!r}")
        doc.setdefault("builds", {})
        problem = damage(doc)
        if problem:
            raise ValueError(f"{directory}/report.json is damaged: {problem}")
        return cls(directory, doc)

    @property
    def results(self) -> list[dict[str, Any]]:
        return self.doc["results"]

    def result_for(self, cid: str) -> dict[str, Any] | None:
        for r in self.results:
            if r["id"] == cid:
                return r
        return None

    def add(self, res: Result) -> None:
        self.doc["results"] = [r for r in self.results if r["id"] != res.id] + [res.to_json()]
        self.write()

    def summarize(self) -> dict[str, int]:
        s = {"total": len(self.results), "passed": 0, "failed": 0, "skipped": 0, "exploratory": 0}
        for r in self.results:
            s[{"PASS": "passed", "FAIL": "failed", "SKIP": "skipped"}.get(r["verdict"], "failed")] += 1
            s["exploratory"] += bool(r.get("exploratory"))
        return s

    def write(self, final: bool = False, status: str | None = None) -> None:
        self.doc["summary"] = self.summarize()
        if final:
            self.doc["finished"] = utc_now()
            self.doc["status"] = status or "complete"
        elif status:
            self.doc["status"] = status
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
            atomic_write(self.dir / "report.json", json.dumps(self.doc, indent=2, sort_keys=False, default=str) + "\n")
            atomic_write(self.dir / "report.md", render_markdown(self.doc))
            atomic_write(self.dir / "junit.xml", render_junit(self.doc))
        except OSError as e:
            # the folder by name: `--resume` alone continues reports/latest, which a narrowed run
            # or a first write that failed does not point at; without a report.json there is nothing to resume
            then = (f"what was written before is intact (continue with `verify --resume {self.dir}` once there is "
                    "room)" if (self.dir / "report.json").is_file() else
                    "nothing was recorded there (run verify again once there is room)")
            raise HarnessError(f"cannot write the report in {self.dir}: {e.strerror or e}; {then}") from None


# ---- triage: what a reader of a failure needs -------------------------------------------------

def triage_lines(r: dict[str, Any], rdir: Path | None = None) -> list[str]:
    """Reproduce command, log and dump folders, compiler errors of a failed criterion; paths under
    rdir when given, else relative to the report folder."""
    def where(rel: str) -> str:
        return f"{rdir / rel}/" if rdir is not None else f"{rel}/"

    out = []
    if r.get("reproduce"):
        out.append(f"reproduce: {r['reproduce']}")
    folders = [f"logs: {where(r['log_dir'])}" if r.get("log_dir") else "",
               f"kept dumps: {where(r['kept'])}" if r.get("kept") else ""]
    if any(folders):
        out.append("; ".join(f for f in folders if f))
    if r.get("model"):
        out.append(f"model: {r['model']}")
    for build, errors in ((r.get("details") or {}).get("build_errors") or {}).items():
        out.append(f"compiler errors (build {build}):")
        out += [f"  {e}" for e in errors]
    return out


def stability_text(r: dict[str, Any]) -> str:
    """'' for a stable or non-timing verdict, else the unstable note."""
    st = (r.get("details") or {}).get("stability")
    if not isinstance(st, dict) or st.get("stable", True):
        return ""
    return "unstable: " + "; ".join(st.get("reasons") or [])


# ---- Markdown -------------------------------------------------------------------------------

def cell(text: str) -> str:
    """One Markdown table cell: printable, on one line, with `|` escaped (it would end the cell)."""
    return printable(" ".join(text.splitlines())).replace("|", "\\|")


def _table(rows: list[list[Any]], headers: list[str]) -> str:
    # text cells escaped (a `|` from an engine's message would split its row); numbers as they are
    rows = [[cell(x) if isinstance(x, str) else x for x in r] for r in rows]
    try:
        from tabulate import tabulate

        return tabulate(rows, headers=headers, tablefmt="github")
    except ImportError:  # the harness still reports without tabulate
        out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
        out += ["| " + " | ".join(cell(str(x)) for x in r) + " |" for r in rows]
        return "\n".join(out)


_clip = junit.clip  # one line of at most n characters


def render_markdown(doc: dict[str, Any]) -> str:
    git = doc.get("git") or {}
    sysd = doc.get("system") or {}
    s = doc.get("summary") or {}
    lines = [f"# {doc.get('project') or 'kite'} verify report", ""]
    narrowed = f" ({doc['filter']})" if doc.get("filter") else ""
    lines.append(f"- started {doc.get('started')}, finished {doc.get('finished') or '(running)'}, "
                 f"status **{doc.get('status')}**{narrowed}")
    missing = doc.get("not_run") or []
    if doc.get("status") == "interrupted":
        ran = ", ".join(f"{r['id']} {r['verdict']}" for r in doc.get("results", [])) or "no criterion"
        lines.append(f"- **interrupted** by {doc.get('interrupted_by') or 'a signal'}: what had run: {ran}")
    if missing:
        lines.append(f"- not run: {', '.join(missing)} (no verdict in this report for "
                     f"{len(missing)} of the files' criteria)")
    lines.append((f"- commit `{git['commit']}`" if git.get("commit") else f"- commit: {git.get('why') or 'unknown'}")
                 + (" (dirty)" if git.get("dirty") else ""))
    stale = [f"{n}'s {part}" for n, b in (doc.get("builds") or {}).items() for part in ("engine", "module")
             if (b.get(part) or {}).get("status") == "stale"]
    if stale:  # --no-build ran what an earlier tree built: the verdicts are of that build, not this commit
        lines.append(f"- **built from other sources**: {', '.join(stale)} (stale: built before its sources, "
                     "options or tools changed, and run as it was under --no-build); its verdicts are of "
                     "that build, not of the commit above")
    lines.append(f"- machine: {sysd.get('os', '?')}, {sysd.get('cpu', '?')}, {sysd.get('cores', '?')} cores, "
                 f"{sysd.get('ram_gb', '?')} GiB RAM")
    info = doc.get("engine_info") or {}
    cuda = info.get("cuda") if isinstance(info, dict) else None
    if cuda:
        dev = cuda.get("device") or {}
        gpu = (f"{dev.get('name')} (cc {dev.get('cc')}, driver {dev.get('driver_version')}, "
               f"runtime {dev.get('runtime_version')})") if dev else f"none ({cuda.get('reason') or 'unavailable'})"
        lines.append(f"- GPU: {gpu}")
    elif (sysd.get("nvidia_smi") or {}).get("gpus"):
        g = sysd["nvidia_smi"]["gpus"][0]
        lines.append(f"- GPU (nvidia-smi): {g.get('name')}, driver {g.get('driver')}")
    comp = sysd.get("compilers") or {}
    lines.append("- compilers: " + "; ".join(f"{k}: {v}" for k, v in comp.items() if v))
    lines.append("")
    lines.append(f"**{s.get('passed', 0)} passed, {s.get('failed', 0)} failed, {s.get('skipped', 0)} skipped** "
                 f"of {s.get('total', 0)}" + (f" ({s['exploratory']} exploratory, not pre-registered)"
                                               if s.get("exploratory") else "")
                 + (f"; partial{narrowed}: {len(missing)} not run" if missing else ""))
    lines.append("")
    rows = []
    notes = shared_reasons(doc.get("results", []))
    for r in doc.get("results", []):
        label = " *(exploratory: not pre-registered)*" if r.get("exploratory") else ""
        label += " *(unstable)*" if stability_text(r) else ""
        reason = r.get("reason", "")
        shown = f"note {notes[reason]} (below)" if reason in notes else _clip(reason)
        plot = ((doc.get("plots") or {}).get("files") or {}).get(r["id"])  # harness/history/hook.py draws it
        rows.append([r["id"] + (f" ([plot]({plot}))" if plot else ""), _clip(r.get("title", ""), 60), r["kind"],
                     r["verdict"] + label, f"{r.get('duration_s', 0):.1f}", shown,
                     f"`{r['reproduce']}`" if r.get("reproduce") else ""])
    lines.append(_table(rows, ["id", "title", "kind", "verdict", "s", "reason", "reproduce"]))
    lines.append("")
    for reason, n in notes.items():  # a long reason many criteria share, written once
        lines += [f"Note {n}: {reason}", ""]
    if doc.get("results"):
        lines += ["(s: the criterion's own time; the builds' time is under Builds)", ""]
    if (doc.get("plots") or {}).get("note"):
        lines += [f"*{doc['plots']['note']}*", ""]
    for r in doc.get("results", []):
        if not (r["verdict"] == "SKIP" and r.get("reason") in notes):  # the row and its note say it all
            lines += _detail_md(r)
    builds = doc.get("builds") or {}
    if builds:
        lines += ["## Builds", ""]
        def sha(b: dict[str, Any], part: str) -> str:
            d = (b.get("sha256") or {}).get(part)
            return d[:12] if isinstance(d, str) else ""
        brows = [[n, b["engine"]["status"], b["module"]["status"], f"{b.get('seconds') or 0:.1f}", sha(b, "engine"),
                  sha(b, "module"), _clip(b["engine"].get("reason") or b["module"].get("reason") or "", 80)]
                 for n, b in builds.items()]
        lines += [_table(brows, ["build", "engine", "module", "s", "engine sha256", "module sha256", "note"]), ""]
        for n, b in builds.items():
            for part in ("engine", "module"):
                errors = b[part].get("errors") or [] if b[part].get("status") == "failed" else []
                if errors:
                    lines += [f"First errors of build `{n}` ({part}; full log `{b[part].get('log')}`):", "",
                              "```", *errors, "```", ""]
    lines += ["## Criteria digests", ""]
    drows = [[r["id"], r["file"], r["digest"][:23] + "…", r.get("registration", "")] for r in doc.get("results", [])]
    lines += [_table(drows, ["id", "file", "digest", "registration"]), ""]
    gone = doc.get("withdrawn")
    gone = [w for w in gone if isinstance(w, dict)] if isinstance(gone, list) else []
    if gone:  # registered ids retired by a `withdraw` event: not run, not missing
        lines += ["## Withdrawn criteria", ""]
        lines += [_table([[w.get("id"), w.get("file"), w.get("time"), _clip(str(w.get("reason", "")))] for w in gone],
                         ["id", "file", "withdrawn", "reason"]), ""]
    amends = [(r["id"], a) for r in doc.get("results", []) for a in r.get("amendments", [])]
    if amends:
        lines += ["## Amendments (after registration)", ""]
        lines += [_table([[i, a.get("time"), a.get("reason")] for i, a in amends], ["id", "time", "reason"]), ""]
    return printable("\n".join(lines) + "\n")


def shared_reasons(results: list[dict[str, Any]], longer_than: int = 60) -> dict[str, int]:
    """Reasons longer than `longer_than` that several results share, numbered in order of first use."""
    counts: dict[str, int] = {}
    for r in results:
        counts[r.get("reason", "")] = counts.get(r.get("reason", ""), 0) + 1
    notes: dict[str, int] = {}
    for r in results:
        reason = r.get("reason", "")
        if counts[reason] > 1 and len(reason) > longer_than and reason not in notes:
            notes[reason] = len(notes) + 1
    return notes


def _interval_text(st: dict[str, Any]) -> str:
    method = st.get("method", "percentile")
    if method == "order":
        return "order-statistic interval"
    return f"{'BCa ' if method == 'bca' else ''}bootstrap {st['resamples']}, seed {st['seed']}"


def _detail_md(r: dict[str, Any]) -> list[str]:
    d = r.get("details") or {}
    out = [f"### {r['id']}: {r['title']}", "", f"{r['verdict']}: {r.get('reason', '')}"
           + (" — *exploratory: not pre-registered*" if r.get("exploratory") else ""), ""]
    if r["verdict"] == "FAIL":
        where = f"{r['file']}:{r['line']}" if r.get("line") else r["file"]
        out.append(f"- criterion: `{where}`")
        for t in triage_lines(r):
            if t.startswith("  "):
                out.append(f"    - `{t.strip()}`")
            elif ": " in t and t.split(": ", 1)[0] == "reproduce":
                out.append(f"- reproduce: `{t.split(': ', 1)[1]}`")
            else:
                out.append(f"- {t}")
        out.append("")
    if r["kind"] == "equivalence" and d.get("comparisons"):
        rows = [[c.get("case", ""), c["a"], c["b"], c["dump"], "yes" if c["identical"] else "no", c["differing"],
                 c.get("max_ulp"), f"{c.get('max_abs', 0):.3g}", _clip(c["reason"], 70)] for c in d["comparisons"]]
        out += [_table(rows, ["case", "A", "B", "dump", "identical", "differing", "max ULP", "max abs", "note"]), ""]
    if r["kind"] == "ab_timing" and d.get("pairs"):
        rows = [[p["pair"], p["order"], f"{p['a']:.4g}", f"{p['b']:.4g}", f"{p['ratio']:.4f}"] for p in d["pairs"]]
        out += [_table(rows, ["pair", "order", "A", "B", "ratio"]), ""]
        st = d.get("stats") or {}
        if st:
            out += [f"median ratio {st['median']:.4f}, {st['confidence'] * 100:g}% CI [{st['ci_lower']:.4f}, "
                    f"{st['ci_upper']:.4f}] ({_interval_text(st)}); "
                    f"pass if {d.get('pass_if')}", ""]
        nf = d.get("noise_floor")
        if nf:
            out += [f"A/A noise floor: median {nf['median']:.4f}, CI [{nf['ci_lower']:.4f}, {nf['ci_upper']:.4f}]", ""]
        stab = d.get("stability")
        if isinstance(stab, dict):
            out += [f"**{stability_text(r)}**" if stability_text(r) else
                    f"stable: pair spread {stab.get('spread', 0) * 100:.1f}%", ""]
    if r["kind"] == "run" and d.get("runs"):
        rows = [[x["name"], x.get("ended", ""), "ok" if x.get("ok") else "FAIL", _clip(x.get("reason", ""), 80)]
                for x in d["runs"]]
        out += [_table(rows, ["run", "ended", "result", "note"]), ""]
    if r["kind"] == "artifact" and d.get("files"):
        rows = [[x["path"], "ok" if x.get("ok") else "FAIL", _clip("; ".join(x.get("problems", [])) or
                                                                  ", ".join(x.get("facts", [])), 90)]
                for x in d["files"]]
        out += [_table(rows, ["file", "result", "facts / problems"]), ""]
    return out


# ---- JUnit ----------------------------------------------------------------------------------

def _failure_body(r: dict[str, Any]) -> str:
    """A readable account of a failure: the reason, how to reproduce it, where its files are, and
    the failing parts of its details."""
    d = r.get("details") or {}
    lines = [r.get("reason", ""), f"criterion: {r['file']}" + (f":{r['line']}" if r.get("line") else "")]
    lines += triage_lines(r)
    for c in d.get("comparisons") or []:
        if not c.get("ok", c.get("identical")):
            lines.append(f"compare {c['b']} vs {c['a']}" + (f" [{c['case']}]" if c.get("case") else "")
                         + f", {c['dump']}: {c['reason']}")
    for x in d.get("runs") or []:
        if x.get("ok") is False:
            lines.append(f"run {x.get('name')}: {x.get('reason')}")
    for x in d.get("files") or []:
        if not x.get("ok"):
            lines.append(f"file {x.get('path')}: " + "; ".join(x.get("problems") or []))
    st = d.get("stats")
    if st:
        lines.append(f"median {st['median']:.4f}, CI [{st['ci_lower']:.4f}, {st['ci_upper']:.4f}] over {st['n']} "
                     f"pairs; pass if {d.get('pass_if')}")
    if stability_text(r):
        lines.append(stability_text(r))
    return "\n".join(lines)


def render_junit(doc: dict[str, Any]) -> str:
    cases = []
    for r in doc.get("results", []):
        label = " [exploratory: not pre-registered]" if r.get("exploratory") else ""
        fail = r["verdict"] == "FAIL"
        cases.append(junit.Case(
            r["file"].replace("/", ".").removesuffix(".yaml"), f"{r['id']}: {r['title']}",
            float(r.get("duration_s", 0)), failure=junit.clip(r.get("reason", ""), junit.MESSAGE) + label if fail
            else None, failure_type=r["kind"], body=_failure_body(r) if fail else "",
            skipped=r.get("reason", "") + label if r["verdict"] == "SKIP" else None,
            out=(f"{r['title']}{label}\ndigest {r['digest']}\nlogs {r.get('log_dir') or '-'}"
                 + (f"\n{stability_text(r)}" if stability_text(r) else ""))))
    return junit.render("kite verify", cases, str(doc.get("started") or ""))
