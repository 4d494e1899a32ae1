#!/bin/sh
# session 50, call 3 as it could run (s50c.sh trimmed to what fits the session's last device time; no peer):
#   1. the GPU tests of the final build: test_cuda_decode (PDL on / off bit-identical, the page-locked
#      logits), test_cuda, test_cuda_gemv, test_cuda_attn, and test_engine_conf's cuda runs;
#   2. tandem bench tg128, interleaved, both shapes, 2 rounds: old (session 49, 843ed12), new (the final
#      build's defaults), new with TANDEM_CUDA_PINNED=0 (the logits buffer pageable again).
# Carried: tmp/cuda50c.tar.xz (bin/ with tandem_old, lib/, shared/conformance/models).
R=$(pwd); OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" build /tmp/tb; A=$OUT/d.txt; P=$R/tmp/pk; W=/tmp/w
mkdir -p $W; T0=$(date +%s); st() { echo "== $1 at $(( $(date +%s) - T0 )) s" >> "$A"; }
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total,driver_version --format=csv >> "$A" 2>&1
mkdir -p $P && tar -C $P -xJf tmp/cuda50c.tar.xz
export LD_LIBRARY_PATH=$P/lib TM_SHARED=$P/shared TANDEM_GEMV=avx512
B=$P/bin
st tests
( timeout 150 $B/test_cuda_decode ) > $W/test_cuda_decode.txt 2>&1; grep -E "CHECK|passed|SKIP|PDL|^--" $W/test_cuda_decode.txt | head -30 >> $A
for t in test_cuda test_cuda_gemv test_cuda_attn; do
  ( timeout 100 $B/$t ) > $W/$t.txt 2>&1; grep -E "CHECK|passed|SKIP" $W/$t.txt | head -12 >> $A
done
( cd $R && TM_CONF_ENGINE=cuda timeout 60 $B/test_engine_conf ) > $W/conf.txt 2>&1
grep -v ' fixture: ' $W/conf.txt | tail -4 >> $A
st packages
for m in l q; do case $m in l) like=llama-3.2-1b;; q) like=qwen2.5-0.5b;; esac
  $B/tandem synth --like $like -o /tmp/tb/$m > /dev/null 2>> $A
  $B/tandem convert /tmp/tb/$m -o $R/tmp/$m.tdm --threads 16 > /dev/null 2>> $A
done
st decode
for r in 1 2; do for m in l q; do for v in new old nopin; do
  x=$B/tandem; e=""
  case $v in old) x=$B/tandem_old;; nopin) e="TANDEM_CUDA_PINNED=0";; esac
  env $e timeout 60 $x bench $R/tmp/$m.tdm -t 2 --tests tg128 --reps 3 --prefill cuda --decode cuda \
    --md $W/d-$m-$v-$r.md > $W/d-$m-$v-$r.json 2> $W/d-$m-$v-$r.err
  echo "$r $m $v $(grep -E '^\| tg128' $W/d-$m-$v-$r.md | cut -d'|' -f4)" >> $A
done; done; done
tar -C $W -czf $OUT/w.tgz .
st done
