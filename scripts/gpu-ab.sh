#!/usr/bin/env bash
# Decode speed of this tree's GPU module against a base commit's, in rounds that alternate the two
# modules in one machine start (A/B/A/B), the engine and models the same:
#   git archive BASE native | tar -x -C BASEDIR     (on a machine with the history)
#   scripts/gpu-ab.sh OUTDIR BASEDIR [ROUNDS] [--no-build]
# Builds this tree (python3 -m harness build default stub) and BASEDIR/native/cuda's module into
# build/ab-base/ (unless --no-build), then ROUNDS (default 4) rounds of
# `bench/gpu_decode.py --decode-only --rounds 1 --iters 5 --steps 64 --no-copy` on qwen35-0.8b Q8_0
# and Q4_0, each round base first, then this tree (KITE_CUDA_LIB picks the module), with the SM
# clock read before each run. Writes OUTDIR/ab.md (tok/s a round, median, new / base within each
# round) and the runs' JSON.
#
# One setting A/B'd on one module: BASEDIR `.` is this tree, so both sides run this tree's module
# (build/default; no base build), and KITE_AB_NEW_ENV, a space-separated list of NAME=VALUE, is
# set for the new side's runs alone, e.g.
#   KITE_AB_NEW_ENV="KITE_CUDA_GRAPH_M=1" scripts/gpu-ab.sh OUTDIR . 4
# (KITE_AB_NEW_ENV works with any BASEDIR; unset, both sides run in the same environment.)
set -uo pipefail
cd "$(dirname "$0")/.."
out="${1:?usage: scripts/gpu-ab.sh OUTDIR BASEDIR [ROUNDS] [--no-build]}"
base="${2:?usage: scripts/gpu-ab.sh OUTDIR BASEDIR [ROUNDS] [--no-build]}"
rounds="${3:-4}"
mkdir -p "$out"
export PYTHONUNBUFFERED=1
. scripts/gpu-module.sh
# the new side's own settings: NAME=VALUE words, checked before anything runs
read -r -a new_env <<< "${KITE_AB_NEW_ENV:-}"
for kv in "${new_env[@]}"; do
  [[ "$kv" =~ ^[A-Za-z_][A-Za-z0-9_]*=.*$ ]] || { echo "KITE_AB_NEW_ENV: '$kv' is not NAME=VALUE" >&2; exit 2; }
done
same=0; [ "$base" = . ] && same=1 # this tree on both sides
case " $* " in *" --no-build "*) ;; *)
  python3 -m harness build default stub > "$out/build.log" 2>&1 || { tail -20 "$out/build.log"; exit 1; }
  [ "$same" = 1 ] || module_build "$base/native/cuda" build/ab-base/cuda "$PWD/build/ab-base/bin" 0 \
    > "$out/build-base.log" 2>&1 || { tail -20 "$out/build-base.log"; exit 1; } ;;
esac
models=()
for t in q8_0 q4_0; do models+=("$(python3 -m harness models gen qwen35-0.8b --type "$t" | tail -1)"); done
declare -A lib=([base]="$PWD/build/ab-base/bin/libkite_cuda.so" [new]="$PWD/build/default/bin/libkite_cuda.so")
[ "$same" = 1 ] && lib[base]="${lib[new]}"
for r in $(seq 1 "$rounds"); do
  for side in base new; do
    clock=$(nvidia-smi --query-gpu=clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader 2>/dev/null)
    side_env=()
    [ "$side" = new ] && side_env=("${new_env[@]}")
    echo "== round $r $side ($clock)${side_env[*]:+ ${side_env[*]}}"
    env "${side_env[@]}" KITE_CUDA_LIB="${lib[$side]}" python3 bench/gpu_decode.py --kite build/default/bin/kite \
      --models "${models[@]}" --decode-only --rounds 1 --iters 5 --steps 64 --no-copy --json "$out/ab-$r-$side.json" 2>&1 \
      | grep -E "graph decode|rror"
  done
done | tee "$out/ab.log"
{
  echo "base: ${lib[base]}; new: ${lib[new]}${new_env[*]:+, with ${new_env[*]}}"
  echo
} > "$out/ab.md"
python3 - "$out" "$rounds" <<'EOF' | tee -a "$out/ab.md"
import json, statistics, sys
from pathlib import Path
out, rounds = Path(sys.argv[1]), int(sys.argv[2])
def tok_s(path):
    d = json.loads(path.read_text())
    res = {}
    for m in d["results"]:
        res["Q8_0" if "q8_0" in m["model"] else "Q4_0"] = m["graph"]["tokens_per_s"]
    return res
rows = {(r, s): tok_s(out / f"ab-{r}-{s}.json") for r in range(1, rounds + 1) for s in ("base", "new")
        if (out / f"ab-{r}-{s}.json").exists()}
for q in ("Q8_0", "Q4_0"):
    base = [rows[(r, "base")][q] for r in range(1, rounds + 1) if (r, "base") in rows]
    new = [rows[(r, "new")][q] for r in range(1, rounds + 1) if (r, "new") in rows]
    ratio = [n / b for n, b in zip(new, base)]
    print(f"{q} graph decode tok/s, base: {', '.join(f'{v:.0f}' for v in base)} (median {statistics.median(base):.0f}); "
          f"new: {', '.join(f'{v:.0f}' for v in new)} (median {statistics.median(new):.0f}); new / base within a round: "
          f"{', '.join(f'{v:.3f}' for v in ratio)} (median {statistics.median(ratio):.3f})")
EOF
