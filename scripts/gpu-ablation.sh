#!/usr/bin/env bash
# Probe P8 in one machine start: what each group of ops costs in the M=1 decode step, by leaving
# it out (bench/pass_ablation.py), with this tree's timeline of the same model beside it:
#   scripts/gpu-ablation.sh OUTDIR
# Builds this tree (harness build default stub), its ablation module (build/ablation,
# KITE_CUDA_ABLATION=ON) and its timeline module (build/timeline), generates qwen35-0.8b
# Q8_0, then runs KITE_ABLATION_ROUNDS (default 4) rounds of every group and of all but the
# products, and the timeline as gpu-report.sh reads it (timeline_layers). OUTDIR gets summary.md,
# ablation.md / .json, timeline.md and logs.tgz (a machine that returns few files returns them);
# the logs and the timeline's steps are written in KITE_ABLATION_WORK (default a temp dir).
set -uo pipefail
cd "$(dirname "$0")/.."
out="${1:?usage: scripts/gpu-ablation.sh OUTDIR}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
rounds="${KITE_ABLATION_ROUNDS:-4}"
work="${KITE_ABLATION_WORK:-$(mktemp -d /tmp/gpu-ablation.XXXXXX)}"
mkdir -p "$work"
export PYTHONUNBUFFERED=1
SECONDS=0
summary="$out/summary.md"
note() { echo "$*" | tee -a "$summary"; }
{
  echo "# P8 at $(git rev-parse --short HEAD 2>/dev/null || echo 'this tree'), $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo
  echo "- device: $(nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader 2>&1 | head -1)"
} > "$summary"
# the gguf package for the model generator (no network: the wheel travels in .whl/)
. scripts/gpu-wheel.sh && gguf_from_wheel "$work/pip.log"
. scripts/gpu-module.sh
module_build native/cuda build/ablation/cuda "$PWD/build/ablation/bin" 0 -DKITE_CUDA_ABLATION=ON > "$work/build-ablation.log" 2>&1 &
abl_pid=$!
timeline_build 0 > "$work/build-timeline.log" 2>&1 &
tl_pid=$!
python3 -m harness models gen qwen35-0.8b --type q8_0 > "$work/models.txt" 2> "$work/models.log" &
models_pid=$!
python3 -m harness build default stub > "$work/build.log" 2>&1
note "- build (this tree): exit $? at ${SECONDS} s"
wait "$abl_pid"; arc=$?
wait "$tl_pid"; trc=$?
wait "$models_pid"
q8=$(tail -1 "$work/models.txt")
note "- ablation module: exit $arc; timeline module: exit $trc; model ${q8#"$PWD"/}; at ${SECONDS} s"
if [ "$arc" -eq 0 ] && [ -f "$q8" ]; then
  python3 bench/pass_ablation.py --kite build/default/bin/kite --module build/ablation/bin/libkite_cuda.so \
    --model "$q8" --rounds "$rounds" --md "$out/ablation.md" --json "$out/ablation.json" > "$work/ablation.log" 2>&1
  note "- ablation: exit $? at ${SECONDS} s"
  cat "$out/ablation.md" >> "$summary" 2>/dev/null || tail -20 "$work/ablation.log" | sed 's/^/    /' >> "$summary"
fi
if [ "$trc" -eq 0 ] && [ -f "$q8" ]; then
  timeline_layers "$q8" "$work" 0 "$out/timeline.md"
  note "- timeline: exit $? at ${SECONDS} s"
  echo >> "$summary"
  cat "$out/timeline.md" >> "$summary"
fi
note "- done at ${SECONDS} s"
(cd "$work" && find . -type f -name '*.log' -print0 | tar -czf "$out/logs.tgz" --null -T -) 2>/dev/null
