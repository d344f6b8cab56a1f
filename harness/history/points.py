"""A report read into the rows the history keeps: which commit and machine made it, one value per
(series, metric), and each criterion's verdict. verify, matrix and merge reports share the schema
`kite-report/1`; a `kite-compare/` report goes through `compare_reading` (fields in docs/HISTORY.md).
Each value and verdict names the run that made it (its start): a merged report carries its sources'
results, and a value met again in a merge is one value, not two."""

from __future__ import annotations

import hashlib
import json
import math
import re
import statistics
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.errors import HarnessError
from harness.report.document import SCHEMA as REPORT_SCHEMA
from harness.report.document import damage
from harness.contract import inputs

COMPARE_PREFIX = "kite-compare/"
COMMIT = re.compile(r"[0-9a-fA-F]{4,64}")  # a commit as reports name it: a hash, whole or cut short
TIMED = ("regressed", "improved", "equivalent", "inconclusive")  # compare's sequential verdicts


class Skipped(HarnessError):
    """A report that has no place of its own in a history (its sources do), said and passed over."""


@dataclass(frozen=True)
class Machine:
    cpu: str
    gpu: str
    driver: str

    def label(self) -> str:
        return f"{self.cpu}; {self.gpu}" + (f", driver {self.driver}" if self.driver else "")


@dataclass
class Reading:
    """One report, read: its identity (digest of its canonical JSON), commit, machine, values."""
    digest: str
    source: str  # where it was read from (a path, or path!member of a zip)
    kind: str  # verify, matrix, merged, compare
    commit: str
    started: str
    machine: Machine
    dirty: bool = False  # made from a tree with uncommitted changes: the commit is only its base
    points: list[tuple[str, str, float]] = field(default_factory=list)  # (series, metric, value)
    verdicts: list[dict[str, Any]] = field(default_factory=list)  # series, kind, verdict, reason, detail, title
    runs: dict[str, str] = field(default_factory=dict)  # series -> the start of the run that made it, if not ours

    def run_of(self, series: str) -> str:
        return self.runs.get(series, self.started)


UNRECORDED = Machine("machine not recorded", "GPU not recorded", "")  # a report that does not say
PRESENTATION = ("plots",)  # what `history plot` adds to a report: not part of its content


def canonical_digest(doc: Any) -> str:
    """Same content, same digest, wherever the file lies, however it is indented, drawn or not."""
    if isinstance(doc, dict):
        doc = {k: v for k, v in doc.items() if k not in PRESENTATION}
    text = json.dumps(doc, sort_keys=True, separators=(",", ":"), default=str)
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def _text(x: Any) -> str:
    return x.strip() if isinstance(x, str) else ""


def machine_of(doc: dict[str, Any]) -> Machine:
    """CPU from `system`, GPU and driver from the engine's CUDA device, else from nvidia-smi."""
    sysd = doc.get("system") if isinstance(doc.get("system"), dict) else {}
    gpus = ((sysd.get("nvidia_smi") or {}).get("gpus") or []) if isinstance(sysd.get("nvidia_smi"), dict) else []
    smi = gpus[0] if gpus and isinstance(gpus[0], dict) else {}
    info = doc.get("engine_info") if isinstance(doc.get("engine_info"), dict) else {}
    dev = ((info.get("cuda") or {}).get("device") or {}) if isinstance(info.get("cuda"), dict) else {}
    gpu = _text(dev.get("name") if isinstance(dev, dict) else None) or _text(smi.get("name")) or "no GPU"
    driver = _text(smi.get("driver")) or (str(dev.get("driver_version")) if isinstance(dev, dict)
                                          and dev.get("driver_version") else "")
    return Machine(_text(sysd.get("cpu")) or "unknown CPU", gpu, driver)


def _number(x: Any) -> float | None:
    """A finite float, or None (not a number, not finite, or an integer too large for a float)."""
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return None
    try:
        f = float(x)
    except OverflowError:
        return None
    return f if math.isfinite(f) else None


def _commit(text: str, source: str, key: str) -> str:
    """The report's commit: a hash (it is shown in commands and looked up in git), else refused."""
    if not COMMIT.fullmatch(text):
        raise HarnessError(f"{source}: {key} {text[:80]!r} is not a commit hash")
    return text


def _median(values: list[Any]) -> float | None:
    nums = [v for v in (_number(x) for x in values) if v is not None]
    return statistics.median(nums) if nums else None


def ab_detail(d: dict[str, Any]) -> dict[str, Any]:
    """What a picture of an A/B verdict needs: pair ratios, the interval, the bar, the A/A floor."""
    st = d.get("stats") if isinstance(d.get("stats"), dict) else {}
    nf = d.get("noise_floor") if isinstance(d.get("noise_floor"), dict) else {}
    pairs = [p for p in d.get("pairs") if isinstance(p, dict)] if isinstance(d.get("pairs"), list) else []
    return {"pass_if": d.get("pass_if"), "ratio": d.get("ratio"),
            "ratios": [_number(p.get("ratio")) for p in pairs],
            "median": _number(st.get("median")), "ci_lower": _number(st.get("ci_lower")),
            "ci_upper": _number(st.get("ci_upper")), "confidence": _number(st.get("confidence")),
            "aa": {"ratios": [_number(p.get("ratio")) for p in nf.get("pairs") if isinstance(p, dict)]
                   if isinstance(nf.get("pairs"), list) else [],
                   "median": _number(nf.get("median")), "ci_lower": _number(nf.get("ci_lower")),
                   "ci_upper": _number(nf.get("ci_upper"))} if nf else None}


def _result_points(r: dict[str, Any]) -> list[tuple[str, float]]:
    """(metric, value) of one verify result: duration always; an A/B verdict's ratio, interval,
    each side's median metric and the A/A floor's median."""
    out: list[tuple[str, float]] = []
    if r.get("verdict") == "SKIP":  # nothing was measured: a skip's time is not a figure of the criterion
        return out
    dur = _number(r.get("duration_s"))
    if dur is not None:
        out.append(("duration_s", dur))
    d = r.get("details") if isinstance(r.get("details"), dict) else {}
    for key, v in d.items():  # a matrix entry's build, checks and criteria times
        if key.endswith("_seconds") and _number(v) is not None:
            out.append((key, _number(v)))
    if r.get("kind") == "ab_timing" and isinstance(d.get("stats"), dict):
        for key, metric in (("median", "ratio"), ("ci_lower", "ci_lower"), ("ci_upper", "ci_upper")):
            v = _number(d["stats"].get(key))
            if v is not None:
                out.append((metric, v))
        pairs = [p for p in d.get("pairs") if isinstance(p, dict)] if isinstance(d.get("pairs"), list) else []
        for side in ("a", "b"):
            m = d.get(f"metric_{side}")
            name = m.get("field") if isinstance(m, dict) and isinstance(m.get("field"), str) else "metric"
            v = _median([p.get(side) for p in pairs])
            if v is not None:
                out.append((f"{side}.{name}", v))
        nf = d.get("noise_floor")
        if isinstance(nf, dict) and _number(nf.get("median")) is not None:
            out.append(("aa.ratio", _number(nf["median"])))
    return out


def report_reading(doc: dict[str, Any], source: str) -> Reading:
    """A verify, matrix or merged report (`kite-report/1`)."""
    problem = damage(doc)
    if problem:
        raise HarnessError(f"{source} is damaged: {problem}")
    git = doc.get("git") if isinstance(doc.get("git"), dict) else {}
    commit = _text(git.get("commit"))
    if not commit:
        raise HarnessError(f"{source}: the report names no commit (git.commit), so it has no place in a history")
    commit = _commit(commit, source, "git.commit")
    kind = doc.get("kind") if doc.get("kind") in ("matrix", "merged") else "verify"
    sources = [m for m in doc.get("merged_from") or [] if isinstance(m, dict)] if kind == "merged" else []
    if len({(m.get("commit"), m.get("cpu"), m.get("os")) for m in sources}) > 1:
        raise Skipped(f"{source}: merged from reports of different commits or machines; add those reports "
                      "(its merged_from lists them)")
    rd = Reading(canonical_digest(doc), source, kind, commit, _text(doc.get("started")), machine_of(doc),
                 dirty=git.get("dirty") is True)
    started_of = {m.get("source"): _text(m.get("started")) for m in sources if isinstance(m.get("source"), str)}
    for r in doc["results"]:
        # merge names one source's outcome ID@SOURCE where sources differ (a series of its own), and
        # every source where they agree: the first of those ran it
        series = r["id"]
        first = r["source"].split(",")[0] if isinstance(r.get("source"), str) else ""
        if started_of.get(first):  # a source's result: the source's run made it
            rd.runs[series] = started_of[first]
        rd.points += [(series, m, v) for m, v in _result_points(r)]
        d = r.get("details") or {}
        rd.verdicts.append({"series": series, "kind": r["kind"], "verdict": r["verdict"], "reason": r["reason"],
                            "title": _text(r.get("title")),
                            "detail": ab_detail(d) if r["kind"] == "ab_timing" and d.get("pairs") else None})
    return rd


def compare_verdict(w: dict[str, Any]) -> str:
    """One workload's verdict in the glossary's words (docs/GLOSSARY.md): bytes that must stay the same
    and changed, else its speed verdict ("identical" for an identical build)."""
    speed = _text(w.get("speed"))
    if w.get("bytes") == "changed" and w.get("bytes_rule") == "same":
        return "bytes-changed"
    return {"identical build": "identical"}.get(speed, speed or "?")


def _compare_detail(doc: dict[str, Any], w: dict[str, Any]) -> dict[str, Any] | None:
    """A timed workload's picture: its pair ratios (head/base), the interval at the level it was judged
    at (alpha over the timed workloads), the margin's band (equivalent within it), its A/A floor."""
    interval = w.get("interval") if isinstance(w.get("interval"), list) else []
    lo, hi = (interval + [None, None])[:2]
    pairs = [p for p in w.get("pair_log") or [] if isinstance(p, dict)]
    if _text(w.get("speed")) not in TIMED or not pairs:
        return None
    alpha, tested = _number(doc.get("alpha")), _number(doc.get("tested"))
    nf = w.get("noise_floor") if isinstance(w.get("noise_floor"), dict) else None
    ci = nf.get("ci") if nf and isinstance(nf.get("ci"), list) else []
    margin = _number(w.get("margin"))
    return {"pass_if": None, "band": [1 / (1 + margin), 1 + margin] if margin else None, "ratio": "head/base",
            "ratios": [_number(p.get("ratio")) for p in pairs], "median": _number(w.get("ratio")),
            "ci_lower": _number(lo), "ci_upper": _number(hi),
            "confidence": 1 - alpha / max(1.0, tested) if alpha and tested else None,
            "aa": {"ratios": [_number(x) for x in nf.get("ratios")] if isinstance(nf.get("ratios"), list) else [], "median": _number(nf.get("median")),
                   "ci_lower": _number((ci + [None])[0]), "ci_upper": _number((ci + [None, None])[1])} if nf else None}


def compare_reading(doc: dict[str, Any], source: str) -> Reading:
    """A `kite-compare/N` report (the fields listed in docs/HISTORY.md; anything else in it is left
    alone): the head's commit (for a working tree with changes, the commit it was made on, marked
    dirty), and per workload its verdict; a timed workload's ratio and interval are its values."""
    head = doc.get("head") if isinstance(doc.get("head"), dict) else {}
    commit, label = _text(head.get("commit")), _text(head.get("label"))
    dirty = head.get("dirty") is True
    if dirty and label.endswith("+dirty"):  # the snapshot commit exists only in the cache's worktree
        commit = label[:-len("+dirty")]
    workloads = doc.get("workloads")
    if not commit or not isinstance(workloads, list):
        raise HarnessError(f"{source}: a compare report needs head.commit and a `workloads` list")
    # the machine as a verify report gives it (`system`, `engine_info`), where the report records it
    machine = machine_of(doc) if isinstance(doc.get("system"), dict) else UNRECORDED
    rd = Reading(canonical_digest(doc), source, "compare", _commit(commit, source, "head.commit"),
                 _text(doc.get("started")), machine, dirty=dirty)
    for i, w in enumerate(workloads):
        if not isinstance(w, dict) or not _text(w.get("id")):
            raise HarnessError(f"{source}: workloads[{i}] has no id")
        if _text(w.get("speed")) in TIMED:  # a skipped, identical or failed workload measured nothing
            interval = w.get("interval") if isinstance(w.get("interval"), list) else []
            lo, hi = (interval + [None, None])[:2]
            for key, v in (("ratio", w.get("ratio")), ("ci_lower", lo), ("ci_upper", hi)):
                if _number(v) is not None:
                    rd.points.append((w["id"], f"compare.{key}", _number(v)))  # head over base
        reason = "; ".join(x for x in (f"bytes {_text(w.get('bytes'))}" if _text(w.get("bytes")) else "",
                                       _text(w.get("reason"))) if x)
        rd.verdicts.append({"series": w["id"], "kind": "compare", "verdict": compare_verdict(w), "reason": reason,
                            "title": _text(w.get("title")), "detail": _compare_detail(doc, w)})
    return rd


# schema -> reader; a new report kind is one more line here
READERS: dict[str, Callable[[dict[str, Any], str], Reading]] = {REPORT_SCHEMA: report_reading}


def read_doc(doc: Any, source: str) -> Reading:
    schema = doc.get("schema") if isinstance(doc, dict) else None
    if isinstance(schema, str) and schema.startswith(COMPARE_PREFIX):
        return compare_reading(doc, source)
    if schema not in READERS:
        raise HarnessError(f"{source}: not a kite report (schema {schema!r}; known: "
                           f"{', '.join([*READERS, COMPARE_PREFIX + 'N'])})")
    if doc.get("status") == "running":
        raise HarnessError(f"{source}: the run is still going (status running); add it once it has finished")
    return READERS[schema](doc, source)


def parse_report(text: str, source: str) -> Reading:
    try:
        doc = inputs.json_loads(text)
    except ValueError as e:
        raise HarnessError(f"{source}: not JSON: {e}") from None
    return read_doc(doc, source)


def find_reports(path: Path) -> Iterator[tuple[str, str]]:
    """(source, text) of every report.json at path: the file, a report folder, or a folder of CI
    artifacts (folders and .zip files, searched all the way down, in name order)."""
    if not path.exists():
        raise HarnessError(f"{path}: no such file or folder")
    if path.is_file() and path.suffix == ".zip":
        yield from _zip_reports(path)
    elif path.is_file():
        yield str(path), inputs.read_text(path, inputs.MAX_REPORT)
    else:
        found = sorted(p for p in path.rglob("*") if p.is_file() and not p.is_symlink()
                       and (p.name == "report.json" or p.suffix == ".zip"))
        for p in found:
            yield from find_reports(p)


def _zip_reports(path: Path) -> Iterator[tuple[str, str]]:
    try:
        with zipfile.ZipFile(path) as z:
            for info in sorted(z.infolist(), key=lambda i: i.filename):
                if info.filename.split("/")[-1] == "report.json" and not info.is_dir():
                    if info.file_size > inputs.MAX_REPORT:
                        raise HarnessError(f"{path}!{info.filename}: larger than {inputs.MAX_REPORT} bytes")
                    yield f"{path}!{info.filename}", z.read(info).decode("utf-8", errors="replace")
    except (zipfile.BadZipFile, OSError) as e:
        raise HarnessError(f"{path}: not a readable zip file: {e}") from None


def read_reports(path: Path) -> list[Reading | Skipped]:
    """Every report at path, read; one that has no place of its own comes back as its Skipped."""
    out: list[Reading | Skipped] = []
    for source, text in find_reports(path):
        try:
            out.append(parse_report(text, source))
        except Skipped as e:
            out.append(e)
    return out
