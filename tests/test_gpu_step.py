"""scripts/gpu-step.sh's A/B summary (its ab.md), which a kernel candidate is kept or dropped by
(docs/PERFORMANCE.md): the table of rounds, the medians, how many rounds the new module was
faster in, and the host's greedy pick of each side. The script itself needs a GPU; its summary
is the Python it runs over gpu-ab.sh's JSON files, run here on files written for the test."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def summary_code() -> str:
    text = (REPO / "scripts" / "gpu-step.sh").read_text()
    m = re.search(r"<<'EOF2'\n(.*?)\nEOF2\n", text, re.S)
    assert m, "gpu-step.sh no longer holds its summary as a heredoc"
    return m.group(1)


def write_round(work: Path, r: int, side: str, q8: float, q4: float, pick: tuple[float, float] | None) -> None:
    def model(name: str, tok_s: float) -> dict:
        graph = {"tokens_per_s": tok_s}
        if pick:
            graph.update(greedy_ms=pick[0], greedy_share=pick[1])
        return {"model": name, "graph": graph}

    d = work / f"ab-r{r}"
    d.mkdir(exist_ok=True)
    (d / f"ab-1-{side}.json").write_text(json.dumps(
        {"results": [model("qwen35-0.8b-q8_0-x.gguf", q8), model("qwen35-0.8b-q4_0-x.gguf", q4)]}))


def test_summary_counts_the_rounds_the_new_module_wins_and_prints_each_sides_pick(tmp_path):
    base_q8, new_q8 = [1500, 1480, 1510, 1490], [1560, 1470, 1550, 1530]
    for r, (b, n) in enumerate(zip(base_q8, new_q8, strict=True), start=1):
        write_round(tmp_path, r, "base", b, 1550, (0.080, 0.12))
        write_round(tmp_path, r, "new", n, 1540, (0.060 + r / 1000, 0.09))
    out = subprocess.run([sys.executable, "-c", summary_code(), str(tmp_path), "4"], capture_output=True, text=True,
                         check=True).stdout
    assert "| 2 | 1480 | 1470 | 0.993 | 1550 | 1540 | 0.994 |" in out
    assert "Q8_0: base median 1495, new median 1540 tok/s; new / base median 1.027, new faster in 3 of 4 rounds" in out
    assert "Q4_0: base median 1550, new median 1540 tok/s; new / base median 0.994, new faster in 0 of 4 rounds" in out
    assert "host greedy pick, base, Q8_0: 0.080 ms a step, 12.0 % of the decode window (medians over 4 rounds)" in out
    assert "host greedy pick, new, Q8_0: 0.062 ms a step, 9.0 % of the decode window (medians over 4 rounds)" in out


def test_summary_without_the_picks_says_nothing_of_them(tmp_path):
    # a base tree whose engine does not report its picks
    write_round(tmp_path, 1, "base", 1500, 1550, None)
    write_round(tmp_path, 1, "new", 1510, 1560, None)
    out = subprocess.run([sys.executable, "-c", summary_code(), str(tmp_path), "1"], capture_output=True, text=True,
                         check=True).stdout
    assert "new faster in 1 of 1 rounds" in out and "greedy pick" not in out
