#!/usr/bin/env bash
# compute-sanitizer over the CUDA module on a GPU machine: memcheck, racecheck, synccheck and
# initcheck, each over `kite selftest`, short decodes of the default model (M=1 graph, stream,
# --mt 4) and a 2-step graph decode of qwen35-0.8b Q8_0, whose plan launches the M=1 kernels the
# tiny model's does not (the DeltaNet head op, the wide products).
# Usage: scripts/gpu-sanitize.sh OUTDIR   (writes OUTDIR/sanitize.md and logs)
# KITE_SANITIZE_TOOLS="memcheck racecheck" runs a subset of the tools.
set -uo pipefail
cd "$(dirname "$0")/.."
out="${1:?usage: scripts/gpu-sanitize.sh OUTDIR}"
mkdir -p "$out"
kite=build/default/bin/kite
model=$(python3 -m harness models gen tiny | tail -1)
big=$(python3 -m harness models gen qwen35-0.8b --type q8_0 | tail -1)
cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
runs=(
  "selftest|selftest"
  "graph|run --model $model --prompt 3,1,4,1,5 --steps 8"
  "stream|run --model $model --prompt 3,1,4,1,5 --steps 8"
  "mt4|run --model $model --prompt 3,1,4,1,5,9,2,6,5,3 --steps 2 --mt 4"
  "0.8b-graph|run --model $big --prompt 3,1,4,1,5 --steps 2"
)
{
  echo "| tool | run | exit | errors reported |"
  echo "|---|---|---|---|"
} > "$out/sanitize.md"
for tool in ${KITE_SANITIZE_TOOLS:-memcheck racecheck synccheck initcheck}; do
  for r in "${runs[@]}"; do
    name="${r%%|*}"; args="${r#*|}"
    envs=(); [[ $name == stream ]] && envs=(KITE_CUDA_GRAPH=0)
    log="$out/$tool-$name.log"
    # shellcheck disable=SC2086
    env "${envs[@]}" timeout 300 "$cs" --tool "$tool" --error-exitcode 99 $kite $args > "$log" 2>&1
    rc=$?
    summary=$(grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$log" | tail -1)
    echo "| $tool | $name | $rc | ${summary:-none printed} |" >> "$out/sanitize.md"
  done
done
cat "$out/sanitize.md"
tar -czf "$out/sanitize-logs.tgz" -C "$out" $(cd "$out" && ls *.log) && rm -f "$out"/*.log
