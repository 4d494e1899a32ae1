#!/bin/sh
# Session 62, call 2 (PK=cuda62a): the decode attention's kernel by the step's span (cuda_engine.c dec_mma_span:
# TANDEM_CUDA_DEC_MMA_FROM; the binary of this call: 1024 positions where a kv head has fewer than 16 query heads, since made 8192 / Hk from calls 3-4). The GPU tests
# (test_engine_conf's CUDA runs over all seven conformance models, by default and with FROM=0; test_cuda_decode's
# five sections), then the crossover: the same binary with FROM=0 (the grouped kernel at every span, session 61's
# default) and FROM=1000000 (a block a query head at every span), tg128 and eP+64 for P = 500, 1000, 2000, 4000,
# on the Llama-3.2-1B and Qwen2.5-0.5B shapes, interleaved, two rounds; then the default once a shape.
. tools/device-lib.sh
dev_init d.txt ${PK:-cuda62a}
st tests
TM_CONF_MODELS=llama3,qwen2,qwen3,mistral,gemma2,phi3,qwen3_moe dev_gpu_tests
st packages
dev_shapes 8 l:llama-3.2-1b q:qwen2.5-0.5b # (as run: the same steps spelled out here)
st ab
T=tg128,e500+64,e1000+64,e2000+64,e4000+64
ab() { # ab M V ROUND: FROM=V (def: unset)
  if [ $2 = def ]; then unset TANDEM_CUDA_DEC_MMA_FROM; else export TANDEM_CUDA_DEC_MMA_FROM=$2; fi
  timeout 60 $B/tandem bench /tmp/tb/$1.tdm -t 4 --tests $T --reps 3 --prefill cuda --decode cuda \
    --md $W/ab-$1-$2-$3.md > /dev/null 2>> $W/bench.err
  unset TANDEM_CUDA_DEC_MMA_FROM
  echo "$1 FROM=$2 round $3: $(grep -E '^\| (tg|e)' $W/ab-$1-$2-$3.md | cut -d'|' -f2,4,5 | tr '\n' ' ')" >> $A
}
for r in 1 2; do for m in l q; do for v in 0 1000000; do
  [ $r = 1 ] || [ $(( $(date +%s) - T0 )) -lt 430 ] && ab $m $v $r; done; done; done
for m in l q; do [ $(( $(date +%s) - T0 )) -lt 500 ] && ab $m def 1; done
cd $W && tar -czf $OUT/d.tar.gz ab-*.md dec.txt conf.txt conf0.txt 2>/dev/null; cd $R
grep -iE "error|fail" $W/bench.err | head -6 | cut -c1-250 >> $A
st done
