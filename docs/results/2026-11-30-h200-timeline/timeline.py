"""Summaries of the per-warp records that a module built with timeline.patch (-DKC_DIAG_TL) writes.

Each kite_cuda call with KC_TL_OUT=PREFIX set writes PREFIX.mM (M = rows of the call; the last call
of each M is kept): one 32-byte record per warp of every kernel of the pass (grid id, %globaltimer
at the warp's start and end, kernel id, SM), and k_deltanet's phase marks (ids 51..54).

    python3 timeline.py classes A B   # per kernel class: sum of (end - previous end), A against B
    python3 timeline.py early F...    # per class: warps started before the previous kernel ended
    python3 timeline.py marks F...    # k_deltanet: its phase marks after the previous kernel's end
"""
from __future__ import annotations

import sys
from dataclasses import dataclass

import numpy as np

RECORD = np.dtype([("grid", "<u8"), ("t0", "<u8"), ("t1", "<u8"), ("id", "<u4"), ("sm", "<u4")])
NAMES = {2: "act", 3: "actq", 4: "embed", 5: "deltanet", 6: "qkprep", 7: "attn"}
GEMVS = ("g.in", "g.out", "g.gu", "g.down")  # the four gemvs of a layer, in order
LAYER_GEMVS = 96  # 24 layers x 4; the gemvs after them are the LM head's pieces


@dataclass
class Launch:
    cls: str
    start: int  # first warp's start, ns
    end: int  # last warp's end, ns
    warps: np.ndarray  # this kernel's warp records (marks excluded)
    marks: np.ndarray  # records with a mark id (k_deltanet's phases)


def load(path: str) -> list[Launch]:
    r = np.fromfile(path, dtype=RECORD)
    out: list[Launch] = []
    for g in np.unique(r["grid"]):
        x = r[r["grid"] == g]
        kid = int(x["id"].min())
        w = x[x["id"] == kid]
        out.append(Launch("", int(w["t0"].min()), int(w["t1"].max()), w, x[x["id"] != kid]))
    out.sort(key=lambda k: k.start)
    ngemv = 0
    for k in out:
        kid = int(k.warps["id"][0])
        if kid >= 1000:
            k.cls = "lm" if ngemv >= LAYER_GEMVS else GEMVS[ngemv % 4]
            ngemv += 1
        else:
            k.cls = NAMES.get(kid, str(kid))
    return out


def classes(a_path: str, b_path: str) -> None:
    a, b = load(a_path), load(b_path)
    print(f"{a_path}: {len(a)} launches, span {(a[-1].end - a[0].start) / 1e3:.1f} us; "
          f"{b_path}: {len(b)} launches, span {(b[-1].end - b[0].start) / 1e3:.1f} us")
    sums: dict[str, list[float]] = {}
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        s = sums.setdefault(x.cls if x.cls == y.cls else f"{x.cls}/{y.cls}", [0, 0, 0])
        s[0] += 1
        s[1] += x.end - (a[i - 1].end if i else x.start)
        s[2] += y.end - (b[i - 1].end if i else y.start)
    print("class      n   sum of (end - previous end), us: A  B  B - A")
    for cls, (n, da, db) in sorted(sums.items(), key=lambda kv: kv[1][1] - kv[1][2]):
        print(f"{cls:9s} {n:4d}  {da / 1e3:8.1f} {db / 1e3:8.1f} {(db - da) / 1e3:+8.1f}")


def early(paths: list[str]) -> None:
    for path in paths:
        ks = load(path)
        print(path, f"span {(ks[-1].end - ks[0].start) / 1e3:.1f} us")
        agg: dict[str, list[list[float]]] = {}
        for prev, k in zip(ks, ks[1:], strict=False):
            a = agg.setdefault(k.cls, [[], [], []])
            a[0].append(float((k.warps["t0"] < prev.end).mean()))
            a[1].append(int(k.warps["t0"].max()) - prev.end)
            a[2].append(k.end - prev.end)
        for cls, (fr, last, d) in agg.items():
            print(f"  {cls:9s} early {np.mean(fr):.2f}  last warp start {np.median(last) / 1e3:+.2f} us"
                  f"  end - prev end {np.median(d) / 1e3:.2f} (sum {np.sum(d) / 1e3:.1f})")


def marks(paths: list[str]) -> None:
    for path in paths:
        ks = load(path)
        res: dict[object, list[float]] = {k: [] for k in ("start", 51, 52, 53, 54, "end")}
        for prev, k in zip(ks, ks[1:], strict=False):
            if k.cls != "deltanet":
                continue
            res["start"].append(float(np.median(k.warps["t0"].astype(np.int64) - prev.end)))
            res["end"].append(k.end - prev.end)
            for m in (51, 52, 53, 54):
                t = k.marks[k.marks["id"] == m]["t0"].astype(np.int64)
                res[m].append(float(t.max() - prev.end))
        print(path, " ".join(f"{k}: {np.median(v) / 1e3:+.2f}" for k, v in res.items()),
              "(us after the previous kernel's end; marks: the last warp's)")


if __name__ == "__main__":
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "classes":
        classes(args[0], args[1])
    elif cmd == "early":
        early(args)
    elif cmd == "marks":
        marks(args)
    else:
        sys.exit(__doc__)
