#!/usr/bin/env bash
# One step of a GPU kernel change judged in one machine start, within a time budget:
#   scripts/gpu-step.sh OUTDIR [BASEDIR]
# BASEDIR holds the base tree's native/ (default build/base-main; made by
# `git archive main native | tar -x -C BASEDIR` where the history is, or here if git has it).
# In order, each step logged and bounded by what is left of KITE_STEP_BUDGET seconds (default
# 510, at least 300), a failed step not stopping the later ones:
#   1. builds: this tree (harness build default stub), the base module (build/ab-base, as
#      scripts/gpu-ab.sh --no-build expects it) and this tree's timeline module, the last two in
#      the background; qwen35-0.8b Q8_0 and Q4_0 generated meanwhile;
#   2. speed, alone on the machine: scripts/gpu-ab.sh one round at a time (base, then new), up to
#      KITE_STEP_ROUNDS (default 6) rounds while 200 s stay for the rest;
#   3. bytes, in the background: harness verify --only D4 D5 D6 E6 E7 G1, then F5 (D5, D6 and F5
#      run qwen35-0.8b, whose DeltaNet heads take the M=1 head op; the tiny model's do not);
#   4. meanwhile compute-sanitizer memcheck, racecheck and synccheck on the qwen35-0.8b decode,
#      graph and stream, over the kernels named KITE_STEP_KERNEL (default k_deltanet_head);
#   5. the per-layer timeline of this tree (bench/pass_timeline.py --layers), if time is left.
# Steps 4 and 5 run the Q8_0 file, or the Q4_0 one with KITE_STEP_MODEL=q4_0 (a kernel that only a
# Q4_0 file's plan launches).
# OUTDIR gets summary.md (written as the steps end), ab.md (with the host's greedy pick), bytes.md, f5.md, sanitize.md,
# timeline.md and logs.tgz (the logs); the work folder is KITE_STEP_WORK (default a temp dir).
# One setting instead of a kernel (as gpu-ab.sh): BASEDIR `.` runs this tree's module on both sides
# of the A/B rounds (no base build), and KITE_AB_NEW_ENV (NAME=VALUE words) is set for the new side
# there and for steps 3-5, which judge the new side, e.g.
#   KITE_AB_NEW_ENV="KITE_CUDA_GRAPH_M=1" scripts/gpu-step.sh OUTDIR .
set -uo pipefail
cd "$(dirname "$0")/.."
out="${1:?usage: scripts/gpu-step.sh OUTDIR [BASEDIR]}"
base="${2:-build/base-main}"
budget="${KITE_STEP_BUDGET:-510}"
rounds="${KITE_STEP_ROUNDS:-6}"
kernel="${KITE_STEP_KERNEL:-k_deltanet_head}"
judged_type="${KITE_STEP_MODEL:-q8_0}"
# the build keeps 240 s for the steps after it and needs 60 of its own: a smaller budget would time
# it out at once and run the later steps on no module, spending device time for nothing
min_budget=300
if ! [[ "$budget" =~ ^[0-9]+$ && "$rounds" =~ ^[0-9]+$ ]] || [ "$budget" -lt "$min_budget" ]; then
  echo "gpu-step.sh: KITE_STEP_BUDGET=$budget KITE_STEP_ROUNDS=$rounds: whole seconds and rounds, a budget of" \
    "at least $min_budget s (the build's 60 s and the 240 s it keeps for the steps after it)" >&2
  exit 2
fi
case "$judged_type" in
  q8_0|q4_0) ;;
  *) echo "gpu-step.sh: KITE_STEP_MODEL=$judged_type: q8_0 or q4_0 (the file the sanitizers and the timeline run)" >&2
     exit 2 ;;
esac
mkdir -p "$out"
out="$(cd "$out" && pwd)"
read -r -a new_env <<< "${KITE_AB_NEW_ENV:-}" # the new side's settings (gpu-ab.sh checks them)
work="${KITE_STEP_WORK:-$(mktemp -d /tmp/gpu-step.XXXXXX)}"
mkdir -p "$work"
export PYTHONUNBUFFERED=1
SECONDS=0
summary="$out/summary.md"
left() { echo $((budget - SECONDS)); }
note() { echo "$*" | tee -a "$summary"; }
# a step's time limit: at most $1 seconds, and what the budget leaves less $2 for the steps after
limit() { local l=$(($(left) - $2)); [ "$l" -gt "$1" ] && l=$1; [ "$l" -lt 1 ] && l=1; echo "$l"; }

{
  echo "# GPU step at $(git rev-parse --short HEAD 2>/dev/null || echo 'this tree'), $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo
  echo "- device: $(nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader 2>&1 | head -1)"
  echo "- base: $base; budget ${budget} s; rounds $rounds${new_env[*]:+; new side with ${new_env[*]}}"
  echo
} > "$summary"

# the gguf package for the model generator (no network: the wheel travels in .whl/)
. scripts/gpu-wheel.sh && gguf_from_wheel "$work/pip.log"

# 1. builds, the models meanwhile
if [ ! -d "$base/native/cuda" ] && git rev-parse --verify -q main >/dev/null 2>&1; then
  mkdir -p "$base" && git archive main native | tar -x -C "$base"
fi
. scripts/gpu-module.sh
# a warm machine keeps an earlier call's build folders, and the sources travel with their own times,
# which can be older than those objects: the two modules built here by CMake alone start empty
# (the harness's own build rebuilds what changed by its record of the sources)
rm -rf build/ab-base
base_pid= have_base=0
if [ "$base" = . ]; then
  have_base=1 # this tree's module on both sides: nothing more to build
elif [ -d "$base/native/cuda" ]; then
  module_build "$base/native/cuda" build/ab-base/cuda "$PWD/build/ab-base/bin" "$(limit 300 200)" \
    > "$work/build-base.log" 2>&1 &
  base_pid=$! have_base=1
fi
timeline_build "$(limit 300 200)" > "$work/build-timeline.log" 2>&1 &
tl_pid=$!
(for t in q8_0 q4_0; do python3 -m harness models gen qwen35-0.8b --type "$t" | tail -1; done) \
  > "$work/models.txt" 2> "$work/models.log" &
models_pid=$!
timeout "$(limit 300 240)" python3 -m harness build default stub > "$work/build.log" 2>&1
rc=$?
note "- build (this tree): exit $rc at ${SECONDS} s"
[ "$rc" -ne 0 ] && tail -30 "$work/build.log" | sed 's/^/    /' >> "$summary"
wait "$models_pid"
note "- models: exit $? at ${SECONDS} s: $(sed "s#^$PWD/##" "$work/models.txt" | tr '\n' ' ')" # paths in the tree
q8=$(sed -n 1p "$work/models.txt")
judged=$q8 # the file of steps 4 and 5
[ "$judged_type" = q4_0 ] && judged=$(sed -n 2p "$work/models.txt")
judged_name="qwen35-0.8b $(echo "$judged_type" | tr a-z A-Z)"

# 2. speed first, on a quiet machine: A/B rounds of one base and one new run each (scripts/gpu-ab.sh),
# as many as the budget leaves time for, up to $rounds, keeping 200 s for the steps after
wait "$tl_pid"
trc=$?
if [ "$have_base" = 1 ]; then
  brc=0
  if [ -n "$base_pid" ]; then wait "$base_pid"; brc=$?; fi
  note "- build (base module): exit $brc; timeline module: exit $trc; at ${SECONDS} s"
  r=0
  while [ "$brc" -eq 0 ] && [ "$r" -lt "$rounds" ]; do
    t0=$SECONDS
    lim=$(limit 120 200)
    [ "$lim" -lt 20 ] && break
    r=$((r + 1))
    timeout "$lim" scripts/gpu-ab.sh "$work/ab-r$r" "$base" 1 --no-build > "$work/ab-r$r.log" 2>&1
    note "- A/B round $r: exit $? in $((SECONDS - t0)) s"
    [ $(($(left) - 200)) -lt $((SECONDS - t0)) ] && break # another round would eat the later steps' time
  done
  python3 - "$work" "$r" > "$out/ab.md" 2>> "$work/ab-table.log" <<'EOF2'
import json, statistics, sys
from pathlib import Path
work, rounds = Path(sys.argv[1]), int(sys.argv[2])
def tok_s(path):
    d = json.loads(path.read_text())
    return {("Q8_0" if "q8_0" in m["model"] else "Q4_0"): m["graph"]["tokens_per_s"] for m in d["results"]}
rows = []
for r in range(1, rounds + 1):
    b, n = work / f"ab-r{r}" / "ab-1-base.json", work / f"ab-r{r}" / "ab-1-new.json"
    if b.exists() and n.exists():
        rows.append((r, tok_s(b), tok_s(n)))
print("| round | Q8_0 base | Q8_0 new | new / base | Q4_0 base | Q4_0 new | new / base |")
print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
for r, b, n in rows:
    print(f"| {r} | {b['Q8_0']:.0f} | {n['Q8_0']:.0f} | {n['Q8_0'] / b['Q8_0']:.3f} | "
          f"{b['Q4_0']:.0f} | {n['Q4_0']:.0f} | {n['Q4_0'] / b['Q4_0']:.3f} |")
for q in ("Q8_0", "Q4_0"):
    if rows:
        base = [b[q] for _, b, _ in rows]
        new = [n[q] for _, _, n in rows]
        ratio = [x / y for x, y in zip(new, base)]
        print(f"\n{q}: base median {statistics.median(base):.0f}, new median {statistics.median(new):.0f} tok/s; "
              f"new / base median {statistics.median(ratio):.3f}, new faster in {sum(x > 1 for x in ratio)} "
              f"of {len(ratio)} rounds")
# the host's greedy pick in the graph decode window (timings.step_greedy_ms; docs/PERFORMANCE.md's 3 % bar)
for side in ("base", "new"):
    picks = {}
    for r, _, _ in rows:
        d = json.loads((work / f"ab-r{r}" / f"ab-1-{side}.json").read_text())
        for m in d["results"]:
            g = m["graph"]
            if "greedy_share" in g:
                picks.setdefault("Q8_0" if "q8_0" in m["model"] else "Q4_0", []).append((g["greedy_ms"], g["greedy_share"]))
    for q, v in sorted(picks.items()):
        print(f"\nhost greedy pick, {side}, {q}: {statistics.median(x for x, _ in v):.3f} ms a step, "
              f"{100 * statistics.median(y for _, y in v):.1f} % of the decode window (medians over {len(v)} rounds)")
EOF2
  sed 's/^/    /' "$out/ab.md" >> "$summary"
else
  note "- A/B: not run (no base tree at $base)"
fi

# 3. bytes (short contexts, then after 3000 tokens) in the background while the sanitizers run:
# neither is timed
verify() { # NAME LIMIT IDS...: harness verify of these criteria, its report as OUTDIR/NAME.md
  local name=$1 lim=$2; shift 2
  if [ "$lim" -lt 30 ]; then echo "- verify $*: not run (${lim} s left for it)"; return; fi
  env "${new_env[@]}" timeout "$lim" python3 -m harness verify --no-build --reports "$work/runs-$name" --only "$@" \
    > "$work/verify-$name.log" 2>&1
  local rc=$? run
  run=$(find "$work/runs-$name" -mindepth 1 -maxdepth 1 -type d -name '2*' 2>/dev/null | sort | tail -1)
  [ -n "$run" ] && cp "$run/report.md" "$out/$name.md" 2>/dev/null
  echo "- verify $* (limit ${lim} s): exit $rc at ${SECONDS} s"
  tail -12 "$work/verify-$name.log" | sed 's/^/    /'
}
(
  verify bytes "$(limit 200 60)" D4 D5 D6 E6 E7 G1
  verify f5 "$(limit 300 50)" F5
) > "$work/verify-summary.md" 2>&1 &
verify_pid=$!

# 4. compute-sanitizer on the new kernel, qwen35-0.8b Q8_0 decode, graph and stream
cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
{ echo "| tool | run | exit | errors reported |"; echo "|---|---|---|---|"; } > "$out/sanitize.md"
for run in memcheck:graph racecheck:graph synccheck:graph memcheck:stream racecheck:stream synccheck:stream; do
  tool=${run%%:*} mode=${run#*:}
  lim=$(limit 60 60)
  if [ "$lim" -lt 20 ] || [ ! -x build/default/bin/kite ]; then
    echo "| $tool | $mode | not run | ${lim} s left, engine built: $([ -x build/default/bin/kite ] && echo yes || echo no) |" \
      >> "$out/sanitize.md"
    continue
  fi
  graph=1; [ "$mode" = stream ] && graph=0
  log="$work/sanitize-$tool-$mode.log"
  filter=(--kernel-name "kns=$kernel")
  KITE_CUDA_GRAPH=$graph env "${new_env[@]}" timeout "$lim" "$cs" --tool "$tool" "${filter[@]}" --error-exitcode 99 \
    build/default/bin/kite run --model "$judged" --prompt 3,1,4,1,5 --steps 3 > "$log" 2>&1
  rc=$?
  if ! grep -qE "ERROR SUMMARY|RACECHECK SUMMARY" "$log" && grep -qiE "unrecognized|unknown option|invalid" "$log"; then
    mode="$mode, every kernel" # this compute-sanitizer does not take the filter: the whole decode
    lim=$(limit 60 60)
    KITE_CUDA_GRAPH=$graph env "${new_env[@]}" timeout "$lim" "$cs" --tool "$tool" --error-exitcode 99 \
      build/default/bin/kite run --model "$judged" --prompt 3,1,4,1,5 --steps 3 >> "$log" 2>&1
    rc=$?
  fi
  summ=$(grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$log" | tail -1)
  echo "| $tool | $mode | $rc | ${summ:-none printed} |" >> "$out/sanitize.md"
done
note "- sanitizers on $kernel, $judged_name (--steps 3), at ${SECONDS} s:"
sed 's/^/    /' "$out/sanitize.md" >> "$summary"
wait "$verify_pid"
cat "$work/verify-summary.md" >> "$summary"

# 5. the per-layer timeline of this tree, if time is left
lim=$(limit 60 10)
if [ "$trc" -eq 0 ] && [ "$lim" -ge 20 ] && [ -x build/default/bin/kite ]; then
  timeline_layers "$judged" "$work" "$lim" "$out/timeline.md" "${new_env[@]}"
  note "- timeline ($judged_name): exit $? at ${SECONDS} s"
  grep -E "deltanet_head|^Steps" "$out/timeline.md" | head -6 | sed 's/^/    /' >> "$summary"
else
  note "- timeline: not run (build exit $trc, ${lim} s left)"
fi

note "- done at ${SECONDS} s"
(cd "$work" && find . -type f -size -4M -print0 | tar -czf "$out/logs.tgz" --null -T -) 2>/dev/null # no dumps
exit 0
