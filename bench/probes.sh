#!/usr/bin/env bash
# The three device probes of issue 37 (P1 handoff latency, P2 bulk-copy ring streaming, P3 PDL
# lookahead with shared-memory staging): built with nvcc for sm_90 and run once each.
#   bench/probes.sh OUT.md     (the tables, in that order; each probe's exit status after it)
set -uo pipefail
cd "$(dirname "$0")/.."
out="${1:?usage: bench/probes.sh OUT.md}"
dir=$(mktemp -d)
{
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader 2>&1
  for p in probe_handoff probe_ring probe_pdl_stage; do
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
