# Sourced by the GPU machine's scripts (gpu-ab.sh, gpu-step.sh, gpu-ablation.sh, gpu-nsys.sh): one
# CUDA module built by CMake alone, as the harness builds the shipped one, without its test modules
# and probe:
#   module_build SRC BUILD OUTDIR LIMIT [cmake args]
# configures SRC (a native/cuda folder) into BUILD with the library going to OUTDIR, then builds it
# within LIMIT seconds (0: no limit); the extra cmake args pick a variant (-DKITE_CUDA_TIMELINE=ON).
module_build() {
  local src=$1 bdir=$2 odir=$3 lim=$4
  shift 4
  cmake -S "$src" -B "$bdir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKITE_OUTPUT_DIR="$odir" \
    -DKITE_CUDA_TEST_MODULES=OFF -DKITE_CUDA_PROBE=OFF "$@" && timeout "$lim" cmake --build "$bdir"
}
