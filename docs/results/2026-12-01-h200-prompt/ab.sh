#!/usr/bin/env bash
# ab.sh OLD NEW: two builds, each a folder with kite and libkite_cuda.so (the engine finds the module in
# its own folder). Bytes of NEW against KITE_CUDA_FORCE_CPU=1 (NOBYTES=1 skips), then ROUNDS rounds that
# alternate OLD and NEW: decode ms/token, 64-token prefill ms at --mt 1 (graph on, off) and --mt 4 (default
# gates, per-M graphs). Run from the repository root with the gguf package importable. ROUNDS=0: bytes only.
OLD=${1:?OLD build folder}; NEW=${2:?NEW build folder}
gen() { [ -f /tmp/$1-$2.gguf ] || python3 -m harness models gen $1 --type $2 --out /tmp/$1-$2.gguf > /dev/null; }
gen qwen35-0.8b q8_0; gen tiny q8_0; gen qwen35-0.8b q4_0
for b in OLD NEW; do echo "$b: $(${!b}/kite info | grep -i -E 'available|abi' | tr '\n' ' ')"; done
K=$NEW/kite
P=1,2,3,4,5,6,7,8,9,10,11
P40=$(python3 -c "print(','.join(str(i*37%500+1) for i in range(40)))")
if [ -z "$NOBYTES" ]; then
for mdl in qwen35-0.8b-q8_0 qwen35-0.8b-q4_0 tiny-q8_0; do
  KITE_CUDA_FORCE_CPU=1 $K run --model /tmp/$mdl.gguf --prompt $P --steps 5 --dump /tmp/ref-$mdl > /dev/null
  KITE_CUDA_FORCE_CPU=1 $K run --model /tmp/$mdl.gguf --prompt $P40 --steps 5 --dump /tmp/ref40-$mdl > /dev/null
done
c=""
# a configuration: model, KITE_CUDA_GRAPH, --mt, KITE_CUDA_GRAPH_M; MORE_CONFIGS (one per line) adds to the 12
CONFIGS="qwen35-0.8b-q8_0 1 4 0
qwen35-0.8b-q8_0 1 4 1
qwen35-0.8b-q8_0 1 2 0
qwen35-0.8b-q8_0 1 3 1
qwen35-0.8b-q4_0 1 4 1
qwen35-0.8b-q4_0 0 2 0
tiny-q8_0 1 4 1
qwen35-0.8b-q8_0 1 8 0
qwen35-0.8b-q8_0 1 1 0
qwen35-0.8b-q8_0 0 1 0
qwen35-0.8b-q4_0 1 1 1
tiny-q8_0 0 3 1"
[ -n "$MORE_CONFIGS" ] && CONFIGS="$CONFIGS"$'\n'"$MORE_CONFIGS"
mapfile -t CFGS <<< "$CONFIGS"
for cfg in "${CFGS[@]}"; do
  set -- $cfg
  for pp in P P40; do
  ref=/tmp/ref-$1; [ $pp = P40 ] && ref=/tmp/ref40-$1
  KITE_CUDA_GRAPH=$2 KITE_CUDA_GRAPH_M=$4 timeout 60 $K run --model /tmp/$1.gguf --prompt ${!pp} --steps 5 --mt $3 --dump /tmp/d > /tmp/o.txt 2>&1
  rc=$?
  cmp -s $ref/logits.f32 /tmp/d/logits.f32 && cmp -s $ref/h_out.f32 /tmp/d/h_out.f32 && c="$c ok" || { c="$c DIFF($1,$pp,g$2,mt$3,gm$4,rc$rc)"; tail -3 /tmp/o.txt; }
  g=$(python3 -c "import json;c=json.load(open('/tmp/d/meta.json'))['counters'];print(c['gpu_steps']+c['mrow_calls'] if c['cpu_steps']+c['cpu_mrow_calls']==0 else 0)" 2>/dev/null)
  [ "${g:-0}" -gt 0 ] || c="$c NOGPU"
  # no dump: outputs in a ring of one pass; the generated tokens must match
  t1=$(KITE_CUDA_GRAPH=$2 KITE_CUDA_GRAPH_M=$4 timeout 60 $K run --model /tmp/$1.gguf --prompt ${!pp} --steps 5 --mt $3 --json | python3 -c "import json,sys;print(json.load(sys.stdin)['tokens'])")
  t0=$(python3 -c "import json;print(json.load(open('$ref/meta.json'))['tokens'])")
  [ "$t1" = "$t0" ] && c="$c t" || c="$c TOKDIFF($t1|$t0)"
  rm -rf /tmp/d
  done
done
echo "bytes new: $c"
for mdl in tiny-q8_0 qwen35-0.8b-q8_0; do echo "selftest $mdl: $($K selftest --model /tmp/$mdl.gguf 2>&1 | grep -E 'FAIL|passed' | tail -5 | tr '\n' ' ')"; done
fi
P64=$(python3 -c "print(','.join(str(i%1000+1) for i in range(64)))")
med() { python3 -c "import json,sys,statistics;d=json.load(sys.stdin);print('%.4f'%(statistics.median(d['timings']['$1'])/$2))"; }
for q in ${QTS:-q8_0}; do
M=/tmp/qwen35-0.8b-$q.gguf
for rep in $(seq ${ROUNDS:-3}); do
for b in OLD NEW; do
  K=${!b}/kite
  t=$(timeout 60 $K run --model $M --prompt 1,2,3,4,5,6,7,8 --steps 64 --iters 5 --json 2>/dev/null | med decode_ms 64)
  a=$(timeout 60 $K run --model $M --prompt $P64 --steps 0 --mt 1 --iters 5 --json 2>/dev/null | med prefill_ms 1)
  a0=$(KITE_CUDA_GRAPH=0 timeout 60 $K run --model $M --prompt $P64 --steps 0 --mt 1 --iters 3 --json 2>/dev/null | med prefill_ms 1)
  b4=$(timeout 60 $K run --model $M --prompt $P64 --steps 0 --mt 4 --iters 5 --json 2>/dev/null | med prefill_ms 1)
  c=$(KITE_CUDA_GRAPH_M=1 timeout 60 $K run --model $M --prompt $P64 --steps 0 --mt 4 --iters 5 --json 2>/dev/null | med prefill_ms 1)
  echo "$q rep$rep $b token=$t mt1=$a mt1_g0=$a0 mt4=$b4 mt4gm=$c ratio=$(python3 -c "print('%.2f %.2f'%($a/$b4,$a/$c))")"
done; done; done
