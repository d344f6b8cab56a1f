#!/usr/bin/env bash
# Run the whole verify job on a GPU machine without nox and keep what backs a claim:
#   scripts/gpu-report.sh OUTDIR [--no-build]
# Builds both halves and llama.cpp's two builds (unless --no-build: use build/ as it is), runs every
# registered suite, then llama.cpp's criteria (regressions/engines/llamacpp.yaml), merged with the
# suites into one report (OUTDIR/report.{md,json}, junit.xml), then the GPU benchmark with the
# adapter and llama-bench beside kite, where the adapter's time goes (llama-costs.md), the
# sanitizers (sanitize/sanitize.md), the timeline per layer (timeline.md) and the probes (probes.md).
# KITE_REPORT_STEPS picks steps (default: build build-llamacpp-cuda build-llamacpp suites llama bench
# costs sanitize timeline probes), for hosts that bound one command's time: a later call on the same
# host with the same OUTDIR and build/ goes on from there. OUTDIR/steps.log says when each step ended.
# KITE_LLAMA_ONLY="L13 L17 L18" runs only those of llama.cpp's criteria (a partial report, so named).
# KITE_VERIFY_TIMEOUT / KITE_BENCH_TIMEOUT bound each step, in seconds. KITE_EXTERNAL_PACK: a pack of
# scripts/pack_external.py, for a host that can neither fetch nor receive the whole archive.
# KITE_REPORT_RUNS: where verify's run folders go (default OUTDIR; each holds every criterion's logs
# and dumps, thousands of files): OUTDIR keeps only the reports and logs named below.
set -uo pipefail
cd "$(dirname "$0")/.."
out="${1:?usage: scripts/gpu-report.sh OUTDIR [--no-build]}"; shift
mkdir -p "$out"
runs="${KITE_REPORT_RUNS:-$out}"
# an offline host handed llama.cpp's source packed (scripts/pack_external.py): unpacked into a cache
if [ -n "${KITE_EXTERNAL_PACK:-}" ]; then
  export KITE_CACHE="${KITE_CACHE:-$(mktemp -d)}"
  tar -C "$KITE_CACHE" -xzf "$KITE_EXTERNAL_PACK" || { echo "cannot unpack $KITE_EXTERNAL_PACK" >&2; exit 2; }
fi
export PYTHONUNBUFFERED=1
steps=" ${KITE_REPORT_STEPS:-build build-llamacpp-cuda build-llamacpp suites llama bench costs sanitize timeline probes} "
want() { case "$steps" in *" $1 "*) return 0;; esac; return 1; }
case " $* " in *" --no-build "*) for b in build build-llamacpp-cuda build-llamacpp; do steps=${steps/ $b / }; done;; esac
SECONDS=0
ended() { echo "$1: exit $2 at $SECONDS s ($(date -u '+%H:%M:%S UTC'))" >> "$out/steps.log"; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$out/gpu.txt" 2>&1 || true
# the builds first, outside verify's time limit: both halves, then llama.cpp's (the CUDA one: the
# adapter and llama-bench; the CPU one for L7)
if want build; then
  python3 -m harness build default stub > "$out/build-default.log" 2>&1
  ended build $?
fi
# compute-sanitizer over the module (memcheck, racecheck, synccheck, initcheck unless
# KITE_SANITIZE_TOOLS): it reports errors, not times, so it runs beside llama.cpp's builds
sanitize() {
  timeout "${KITE_BENCH_TIMEOUT:-600}" scripts/gpu-sanitize.sh "$out/sanitize" > "$out/sanitize.log" 2>&1
  ended sanitize $?
}
sanitizing=""
if ! want sanitize; then :
elif want build-llamacpp-cuda || want build-llamacpp; then sanitize & sanitizing=$!
else sanitize
fi
for b in llamacpp-cuda llamacpp; do
  if want "build-$b"; then
    python3 -m harness build "$b" > "$out/build-$b.log" 2>&1
    ended "build-$b" $?
  fi
done
[ -n "$sanitizing" ] && wait "$sanitizing"
rc=0
if want suites; then
  timeout "${KITE_VERIFY_TIMEOUT:-1800}" python3 -m harness verify --reports "$runs/runs" "$@" 2>&1 | tee "$out/verify.log"
  rc=${PIPESTATUS[0]}
  ended suites "$rc"
fi
newest() { find "$1" -mindepth 1 -maxdepth 1 -type d -name '2*' 2>/dev/null | sort | tail -1; } # a run's folder: its start time
suites=$(newest "$runs/runs")
# llama.cpp's criteria in a report of their own (the CPU ones too: L7 needs both builds), then one
# report of both; a partial run never moves reports/latest, so each run's folder is named here.
# Without either llama.cpp build (an offline machine without its source archive: KITE_SDIST_DIR)
# they are not run, and the log says so.
llama_run=$(newest "$runs/runs-llama")
if ! want llama; then :
elif [ -x build/llamacpp-cuda/bin/kite-llama ] || [ -x build/llamacpp/bin/kite-llama ]; then
  only=(); [ -n "${KITE_LLAMA_ONLY:-}" ] && only=(--only $KITE_LLAMA_ONLY)
  timeout "${KITE_VERIFY_TIMEOUT:-1800}" python3 -m harness verify --no-build --reports "$runs/runs-llama" \
    regressions/engines/llamacpp.yaml ${only[@]+"${only[@]}"} 2>&1 | tee "$out/verify-llama.log"
  lrc=${PIPESTATUS[0]}
  [ "$lrc" -ne 0 ] && rc=1
  ended llama "$lrc"
  llama_run=$(newest "$runs/runs-llama")
else
  echo "llama.cpp's criteria not run: neither llama.cpp build is there (see build-llamacpp*.log)" | tee "$out/verify-llama.log"
fi
if [ -n "$suites" ] && [ -n "$llama_run" ]; then
  python3 -m harness merge "$suites" "$llama_run" -o "$runs/merged" 2>&1 | tail -2
  cp "$runs"/merged/report.md "$runs"/merged/report.json "$runs"/merged/junit.xml "$out/" 2>/dev/null || true
elif [ -n "$suites" ]; then
  cp "$suites"/report.md "$suites"/report.json "$suites"/junit.xml "$out/" 2>/dev/null || true
fi
# llama.cpp beside kite: the adapter and llama-bench of the llamacpp-cuda build (L6-L15 and the benchmark)
llama=()
[ -x build/llamacpp-cuda/bin/kite-llama ] && llama=(--llama build/llamacpp-cuda/bin/kite-llama)
[ -x build/llamacpp-cuda/bin/llama-bench ] && llama+=(--llama-bench build/llamacpp-cuda/bin/llama-bench)
if want bench; then
  timeout "${KITE_BENCH_TIMEOUT:-600}" python3 bench/gpu_decode.py --kite build/default/bin/kite ${llama[@]+"${llama[@]}"} --models models/qwen35-0.8b-q8_0-*.gguf models/qwen35-0.8b-q4_0-*.gguf --md "$out/gpu-bench.md" --json "$out/gpu-bench.json" 2>&1 | tail -40 | tee "$out/gpu-bench.log"
  ended bench "${PIPESTATUS[0]}"
fi
# where the adapter's time goes on the GPU: each dump cost turned back on, against llama-bench (issue 36)
if want costs && [ -x build/llamacpp-cuda/bin/llama-bench ]; then
  timeout "${KITE_BENCH_TIMEOUT:-600}" python3 bench/cpu_llama.py --adapter build/llamacpp-cuda/bin/kite-llama --ngl 99 --costs --model models/qwen35-0.8b-q8_0-*.gguf --prompt-len 8 --steps 64 --iters 5 --rounds 3 --json "$out/llama-costs.json" > "$out/llama-costs.md" 2> "$out/llama-costs.log"
  ended costs $?
fi
# where a Q8_0 decode step's time goes per op and per layer (timeline_layers, scripts/gpu-module.sh)
if want timeline; then
  . scripts/gpu-module.sh
  q8=$(python3 -m harness models gen qwen35-0.8b --type q8_0 2> "$out/timeline.log" | tail -1)
  timeline_build "${KITE_BENCH_TIMEOUT:-600}" >> "$out/timeline.log" 2>&1 &&
    timeline_layers "$q8" build/timeline "${KITE_BENCH_TIMEOUT:-600}" "$out/timeline.md"
  ended timeline $?
fi
# the device probes of issues 37 and 48, each table kept as it ends
if want probes; then
  timeout "${KITE_BENCH_TIMEOUT:-600}" bench/probes.sh "$out/probes.md" > /dev/null 2> "$out/probes.log"
  ended probes $?
fi
exit "$rc"
