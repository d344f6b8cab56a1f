#!/usr/bin/env bash
# Run the whole verify job on a GPU machine without nox and keep what backs a claim:
#   scripts/gpu-report.sh OUTDIR [--no-build]
# Builds both halves and llama.cpp's two builds (unless --no-build: use build/ as it is), runs every
# registered suite, then llama.cpp's criteria (regressions/engines/llamacpp.yaml), merged with the
# suites into one report (OUTDIR/report.{md,json}, junit.xml), then the GPU benchmark with the
# adapter and llama-bench beside kite, and where the adapter's time goes (llama-costs.md).
# KITE_REPORT_STEPS picks steps (default: build suites llama bench costs), for hosts that bound one
# command's time: a later call on the same host with the same OUTDIR and build/ goes on from there.
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
steps=" ${KITE_REPORT_STEPS:-build suites llama bench costs} "
want() { case "$steps" in *" $1 "*) return 0;; esac; return 1; }
case " $* " in *" --no-build "*) steps=${steps/ build / };; esac
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$out/gpu.txt" 2>&1 || true
# the builds first, outside verify's time limit: both halves, then llama.cpp's (the CUDA one: the
# adapter and llama-bench; the CPU one for L7)
if want build; then
  python3 -m harness build default stub > "$out/build-default.log" 2>&1
  python3 -m harness build llamacpp-cuda > "$out/build-llamacpp-cuda.log" 2>&1
  python3 -m harness build llamacpp > "$out/build-llamacpp.log" 2>&1
fi
rc=0
if want suites; then
  timeout "${KITE_VERIFY_TIMEOUT:-1800}" python3 -m harness verify --reports "$runs/runs" "$@" 2>&1 | tee "$out/verify.log"
  rc=${PIPESTATUS[0]}
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
  [ "${PIPESTATUS[0]}" -ne 0 ] && rc=1
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
want bench && timeout "${KITE_BENCH_TIMEOUT:-600}" python3 bench/gpu_decode.py --kite build/default/bin/kite ${llama[@]+"${llama[@]}"} --models models/qwen35-0.8b-q8_0-*.gguf models/qwen35-0.8b-q4_0-*.gguf --md "$out/gpu-bench.md" --json "$out/gpu-bench.json" 2>&1 | tail -40 | tee "$out/gpu-bench.log"
# where the adapter's time goes on the GPU: each dump cost turned back on, against llama-bench (issue 36)
if want costs && [ -x build/llamacpp-cuda/bin/llama-bench ]; then
  timeout "${KITE_BENCH_TIMEOUT:-600}" python3 bench/cpu_llama.py --adapter build/llamacpp-cuda/bin/kite-llama --ngl 99 --costs --model models/qwen35-0.8b-q8_0-*.gguf --prompt-len 8 --steps 64 --iters 5 --rounds 3 --json "$out/llama-costs.json" > "$out/llama-costs.md" 2> "$out/llama-costs.log"
fi
exit "$rc"
