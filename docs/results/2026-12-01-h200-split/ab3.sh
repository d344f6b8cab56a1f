#!/usr/bin/env bash
# ab3.sh: builds are folders $AB/<name> (default AB=ab), each with kite and libkite_cuda.so (the
# engine finds the module in its own folder). BYTES: the builds checked by ../2026-12-01-h200-prompt/ab.sh
# (h_out and logits against KITE_CUDA_FORCE_CPU=1, GPU counters required, generated tokens of a
# run without --dump, selftest) in its 12 configurations and 3 more; TIMES: the builds timed in
# ROUNDS alternating rounds (QTS: quant types, default q8_0). Run from the repository root with the
# gguf package importable.
AB=${AB:-ab}
HERE=$(dirname "$0")
for b in ${TIMES:-old new}; do echo "$b: $($AB/$b/kite info | grep -i -E 'available|abi' | tr '\n' ' ')"; done
for B in $BYTES; do
  echo "== bytes and selftest of $B"
  MORE_CONFIGS="tiny-q8_0 1 3 0
qwen35-0.8b-q4_0 1 4 0
qwen35-0.8b-q8_0 0 5 0" ROUNDS=0 bash "$HERE/../2026-12-01-h200-prompt/ab.sh" "$AB/old" "$AB/$B"
done
P64=$(python3 -c "print(','.join(str(i%1000+1) for i in range(64)))")
med() { python3 -c "import json,sys,statistics;d=json.load(sys.stdin);print('%.4f'%(statistics.median(d['timings']['$1'])/$2))" 2>/dev/null || echo nan; }
for q in ${QTS:-q8_0}; do
M=/tmp/qwen35-0.8b-$q.gguf
for rep in $(seq ${ROUNDS:-3}); do
for b in ${TIMES:-old new}; do
  K=$AB/$b/kite
  t=$(timeout 60 $K run --model $M --prompt 1,2,3,4,5,6,7,8 --steps 64 --iters 5 --json 2>/dev/null | med decode_ms 64)
  t0=$(KITE_CUDA_GRAPH=0 timeout 60 $K run --model $M --prompt 1,2,3,4,5,6,7,8 --steps 64 --iters 3 --json 2>/dev/null | med decode_ms 64)
  a=$(timeout 60 $K run --model $M --prompt $P64 --steps 0 --mt 1 --iters 5 --json 2>/dev/null | med prefill_ms 1)
  b4=$(timeout 60 $K run --model $M --prompt $P64 --steps 0 --mt 4 --iters 5 --json 2>/dev/null | med prefill_ms 1)
  b8=$(timeout 60 $K run --model $M --prompt $P64 --steps 0 --mt 8 --iters 3 --json 2>/dev/null | med prefill_ms 1)
  c=$(KITE_CUDA_GRAPH_M=1 timeout 60 $K run --model $M --prompt $P64 --steps 0 --mt 4 --iters 5 --json 2>/dev/null | med prefill_ms 1)
  echo "$q rep$rep $b token=$t token_g0=$t0 mt1=$a mt4=$b4 mt8=$b8 mt4gm=$c ratio=$(python3 -c "print('%.2f %.2f'%($a/$b4,$a/$c))" 2>/dev/null)"
done; done; done
