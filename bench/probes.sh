#!/usr/bin/env bash
# The device probes: issue 37's P1 (handoff latency), P2 (bulk-copy ring streaming), P3 (PDL
# lookahead with shared-memory staging) and issue 48's P5 (residency of the next kernel's CTAs),
# P3' (a layer-shaped uniform chain), P1' (an improved handoff), P6 (the LM head kernel alone
# against a streaming read of its bytes), P9 and P11 (a dependent load beside streaming kernels,
# by loads and by bulk copies) and P10 (the release after a grid, by its shape): built with nvcc
# for sm_90 and run once each.
#   bench/probes.sh OUT.md [PROBE...]   (the tables, in that order; each probe's exit status after it)
set -uo pipefail
cd "$(dirname "$0")/.."
out="${1:?usage: bench/probes.sh OUT.md [PROBE...]}"; shift
probes=("$@")
[ ${#probes[@]} -eq 0 ] && probes=(probe_handoff probe_ring probe_pdl_stage probe_residency probe_chain_layer probe_handoff2 probe_lmhead probe_contention probe_release)
dir=$(mktemp -d)
{
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader 2>&1
  for p in "${probes[@]}"; do
    echo
    echo "## $p (nvcc -O3 -arch=sm_90 bench/$p.cu)"
    echo
    if nvcc -O3 -arch=sm_90 -o "$dir/$p" "bench/$p.cu" 2>&1; then
      timeout 120 "$dir/$p" 2>&1
      echo "exit status: $?"
    fi
  done
} > "$out"
rm -rf "$dir"
cat "$out"
