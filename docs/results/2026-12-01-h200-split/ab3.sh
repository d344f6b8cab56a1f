#!/usr/bin/env bash
# ab3.sh: builds are folders $AB/<name> (default AB=ab), each with kite and libkite_cuda.so (the
# engine finds the module in its own folder); the engine of $AB/old makes the KITE_CUDA_FORCE_CPU=1
# references. BYTES: the builds whose h_out and logits are compared with them (cmp; GPU counters
# required; generated tokens of a run without --dump) in 15 configurations x 2 prompts, and their
# selftest; TIMES: the builds timed in ROUNDS alternating rounds (QTS: quant types, default q8_0).
# Run from the repository root with the gguf package importable.
AB=${AB:-ab}
gen() { [ -f /tmp/$1-$2.gguf ] || python3 -m harness models gen $1 --type $2 --out /tmp/$1-$2.gguf > /dev/null; }
gen qwen35-0.8b q8_0; gen tiny q8_0; gen qwen35-0.8b q4_0
for b in ${TIMES:-old new}; do echo "$b: $($AB/$b/kite info | grep -i -E 'available|abi' | tr '\n' ' ')"; done
P=1,2,3,4,5,6,7,8,9,10,11
P40=$(python3 -c "print(','.join(str(i*37%500+1) for i in range(40)))")
K0=$AB/old/kite
for mdl in qwen35-0.8b-q8_0 qwen35-0.8b-q4_0 tiny-q8_0; do
  [ -d /tmp/ref-$mdl ] || KITE_CUDA_FORCE_CPU=1 $K0 run --model /tmp/$mdl.gguf --prompt $P --steps 5 --dump /tmp/ref-$mdl > /dev/null
  [ -d /tmp/ref40-$mdl ] || KITE_CUDA_FORCE_CPU=1 $K0 run --model /tmp/$mdl.gguf --prompt $P40 --steps 5 --dump /tmp/ref40-$mdl > /dev/null
done
for B in $BYTES; do
K=$AB/$B/kite
c=""
for cfg in "qwen35-0.8b-q8_0 1 4 0" "qwen35-0.8b-q8_0 1 4 1" "qwen35-0.8b-q8_0 1 2 0" "qwen35-0.8b-q8_0 1 3 1" "qwen35-0.8b-q4_0 1 4 1" "qwen35-0.8b-q4_0 0 2 0" "tiny-q8_0 1 4 1" "qwen35-0.8b-q8_0 1 8 0" "qwen35-0.8b-q8_0 1 1 0" "qwen35-0.8b-q8_0 0 1 0" "qwen35-0.8b-q4_0 1 1 1" "tiny-q8_0 0 3 1" "tiny-q8_0 1 3 0" "qwen35-0.8b-q4_0 1 4 0" "qwen35-0.8b-q8_0 0 5 0"; do
  set -- $cfg
  for pp in P P40; do
  ref=/tmp/ref-$1; [ $pp = P40 ] && ref=/tmp/ref40-$1
  KITE_CUDA_GRAPH=$2 KITE_CUDA_GRAPH_M=$4 timeout 60 $K run --model /tmp/$1.gguf --prompt ${!pp} --steps 5 --mt $3 --dump /tmp/d > /tmp/o.txt 2>&1
  rc=$?
  cmp -s $ref/logits.f32 /tmp/d/logits.f32 && cmp -s $ref/h_out.f32 /tmp/d/h_out.f32 && c="$c ok" || { c="$c DIFF($1,$pp,g$2,mt$3,gm$4,rc$rc)"; tail -3 /tmp/o.txt; }
  g=$(python3 -c "import json;c=json.load(open('/tmp/d/meta.json'))['counters'];print(c['gpu_steps']+c['mrow_calls'] if c['cpu_steps']+c['cpu_mrow_calls']==0 else 0)" 2>/dev/null)
  [ "${g:-0}" -gt 0 ] || c="$c NOGPU"
  t1=$(KITE_CUDA_GRAPH=$2 KITE_CUDA_GRAPH_M=$4 timeout 60 $K run --model /tmp/$1.gguf --prompt ${!pp} --steps 5 --mt $3 --json | python3 -c "import json,sys;print(json.load(sys.stdin)['tokens'])")
  t0=$(python3 -c "import json;print(json.load(open('$ref/meta.json'))['tokens'])")
  [ "$t1" = "$t0" ] && c="$c t" || c="$c TOKDIFF($t1|$t0)"
  rm -rf /tmp/d
  done
done
echo "bytes $B: $c"
for mdl in tiny-q8_0 qwen35-0.8b-q8_0; do echo "selftest $B $mdl: $($K selftest --model /tmp/$mdl.gguf 2>&1 | grep -E 'FAIL|passed' | tail -5 | tr '\n' ' ')"; done
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
