# Sourced by the GPU machine's scripts (gpu-ab.sh, gpu-step.sh, gpu-ablation.sh, gpu-nsys.sh,
# gpu-report.sh): one CUDA module built by CMake alone, as the harness builds the shipped one,
# without its test modules and probe:
#   module_build SRC BUILD OUTDIR LIMIT [cmake args]
# configures SRC (a native/cuda folder) into BUILD with the library going to OUTDIR, then builds it
# within LIMIT seconds (0: no limit); the extra cmake args pick a variant (-DKITE_CUDA_TIMELINE=ON).
module_build() {
  local src=$1 bdir=$2 odir=$3 lim=$4
  shift 4
  cmake -S "$src" -B "$bdir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKITE_OUTPUT_DIR="$odir" \
    -DKITE_CUDA_TEST_MODULES=OFF -DKITE_CUDA_PROBE=OFF "$@" && timeout "$lim" cmake --build "$bdir"
}

# The module with its per-op timeline on, built anew into build/timeline (a warm machine's may be
# another tree's sources with newer times): timeline_build LIMIT
timeline_build() {
  rm -rf build/timeline
  module_build native/cuda build/timeline/cuda "$PWD/build/timeline/bin" "$1" -DKITE_CUDA_TIMELINE=ON
}
# One decode as the timeline readings take it (this tree's engine beside the timeline module, a
# 64-token prompt, 64 steps, CUDA graph on), read per op and per layer by bench/pass_timeline.py:
#   timeline_layers MODEL WORKDIR LIMIT OUT.md [NAME=VALUE ...]
# WORKDIR gets steps.txt (anew: the module appends to it), timeline-run.log and timeline.log; the
# NAME=VALUE words set the decode's env.
timeline_layers() {
  local model=$1 work=$2 lim=$3 md=$4
  shift 4
  rm -f "$work/steps.txt"
  cp build/default/bin/kite build/timeline/bin/ &&
    env KITE_CUDA_TIMELINE="$work/steps.txt" "$@" timeout "$lim" build/timeline/bin/kite run --model "$model" \
      --prompt "$(seq -s, 1 64)" --steps 64 > "$work/timeline-run.log" 2>&1 &&
    python3 bench/pass_timeline.py "$work/steps.txt" --layers > "$md" 2> "$work/timeline.log"
}
