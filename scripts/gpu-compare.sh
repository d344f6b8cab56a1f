#!/usr/bin/env bash
# Issue 33's GPU report: three compares on one GPU machine, each with its pairs and seconds.
#   scripts/gpu-compare.sh OUTDIR [BEFORE]
# 1. planted: HEAD against HEAD plus bench/data/planted-gpu-2pct.patch (a spin of about 2 % of a
#             Q8_0 decode step before each pass), committed on a temporary ref: regressed;
# 2. aa:      HEAD against HEAD with the short-circuit off (an A/A run): equivalent, no false alarm;
# 3. before:  BEFORE (default: the parent of the last commit that changed the module's code, that is
#             native/cuda but its CMake presets) against HEAD.
# KITE_GPU_COMPARE_SECONDS caps each workload's timing (default 120 s; _PLANTED, _AA and _BEFORE
# override it for one compare); KITE_GPU_COMPARE_ONLY names the workloads (default CMP3 CMP5); the
# cache of revisions is $KITE_COMPARE_CACHE (default: one folder per project under ~/.cache/kite/compare); KITE_GPU_COMPARE_STEPS
# names the compares to run (default: planted aa before).
set -uo pipefail
cd "$(dirname "$0")/.."
out="${1:?usage: scripts/gpu-compare.sh OUTDIR [BEFORE]}"
mkdir -p "$out"
export PYTHONUNBUFFERED=1
secs="${KITE_GPU_COMPARE_SECONDS:-120}"
read -r -a only <<<"${KITE_GPU_COMPARE_ONLY:-CMP3 CMP5}"
head=$(git rev-parse HEAD)
before="${2:-$(git rev-parse "$(git log -1 --format=%H -- native/cuda ':!native/cuda/CMakePresets.json')^")}"

# the planted revision: HEAD plus the patch, committed in a worktree of its own (the user's tree and
# branches are untouched; the ref refs/kite/planted-gpu-2pct keeps the commit)
tmp=$(mktemp -d)
git worktree add -q --detach "$tmp/src" HEAD
git -C "$tmp/src" apply "$PWD/bench/data/planted-gpu-2pct.patch"
git -C "$tmp/src" -c user.name=kite -c user.email=kite@localhost commit -qam "planted: 2 % of a Q8_0 decode step"
planted=$(git -C "$tmp/src" rev-parse HEAD)
git update-ref refs/kite/planted-gpu-2pct "$planted"
git worktree remove --force "$tmp/src"; rm -rf "$tmp"

rc=0
run() {  # name, seconds, compare's arguments...
  local name=$1 cap=$2; shift 2
  local t0=$SECONDS
  python3 -m harness compare "$@" --only "${only[@]}" --max-seconds "$cap" --out "$out/$name" 2>&1 | tee "$out/$name.log"
  local r=${PIPESTATUS[0]}
  echo "$name: exit $r, $((SECONDS - t0)) s (builds included)" | tee -a "$out/seconds.txt"
  ((r > 1)) && rc=2
  return 0
}
echo "head $head, planted $planted, before $before" | tee "$out/revisions.txt"
steps=" ${KITE_GPU_COMPARE_STEPS:-planted aa before} "
# the planted slowdown first: it needs the most pairs to be told apart
[[ $steps == *" planted "* ]] && run planted "${KITE_GPU_COMPARE_SECONDS_PLANTED:-$secs}" "$head" "$planted"
[[ $steps == *" aa "* ]] && run aa "${KITE_GPU_COMPARE_SECONDS_AA:-$secs}" "$head" "$head" --no-short-circuit
[[ $steps == *" before "* ]] && run before "${KITE_GPU_COMPARE_SECONDS_BEFORE:-$secs}" "$before" "$head"
exit "$rc"
