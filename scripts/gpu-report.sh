#!/usr/bin/env bash
# Run the whole verify job on a GPU machine without nox and keep what backs a claim:
#   scripts/gpu-report.sh OUTDIR [--no-build]
# Builds both halves (unless --no-build: use build/ as it is), runs every registered suite,
# then the GPU benchmark (KITE_VERIFY_TIMEOUT / KITE_BENCH_TIMEOUT bound each, in seconds), and copies report.{md,json}, junit.xml and the benchmark table to OUTDIR.
# It also builds llamacpp-cuda (the llama.cpp adapter and llama-bench), and the benchmark puts both beside kite.
set -uo pipefail
cd "$(dirname "$0")/.."
out="${1:?usage: scripts/gpu-report.sh OUTDIR [--no-build]}"; shift
mkdir -p "$out"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$out/gpu.txt" 2>&1 || true
# llama.cpp's CUDA build (the adapter and llama-bench) first, outside verify's time limit
case " $* " in *" --no-build "*) ;; *) python3 -m harness build llamacpp-cuda > "$out/build-llamacpp-cuda.log" 2>&1 ;; esac
timeout "${KITE_VERIFY_TIMEOUT:-1800}" python3 -m harness verify "$@" 2>&1 | tee "$out/verify.log"
rc=${PIPESTATUS[0]}
cp reports/latest/report.md reports/latest/report.json reports/latest/junit.xml "$out/" 2>/dev/null || true
# llama.cpp beside kite: the adapter and llama-bench of the llamacpp-cuda build (L6-L15 and the benchmark)
llama=()
[ -x build/llamacpp-cuda/bin/kite-llama ] && llama=(--llama build/llamacpp-cuda/bin/kite-llama)
[ -x build/llamacpp-cuda/bin/llama-bench ] && llama+=(--llama-bench build/llamacpp-cuda/bin/llama-bench)
timeout "${KITE_BENCH_TIMEOUT:-600}" python3 bench/gpu_decode.py --kite build/default/bin/kite ${llama[@]+"${llama[@]}"} --models models/qwen35-0.8b-q8_0-*.gguf models/qwen35-0.8b-q4_0-*.gguf --md "$out/gpu-bench.md" --json "$out/gpu-bench.json" 2>&1 | tail -40 | tee "$out/gpu-bench.log"
# where the adapter's time goes on the GPU: each dump cost turned back on, against llama-bench (issue 36)
if [ -x build/llamacpp-cuda/bin/llama-bench ]; then
  timeout "${KITE_BENCH_TIMEOUT:-600}" python3 bench/cpu_llama.py --adapter build/llamacpp-cuda/bin/kite-llama --ngl 99 --costs --model models/qwen35-0.8b-q8_0-*.gguf --prompt-len 8 --steps 64 --iters 5 --rounds 3 --json "$out/llama-costs.json" > "$out/llama-costs.md" 2> "$out/llama-costs.log"
fi
exit "$rc"
