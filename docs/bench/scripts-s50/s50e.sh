#!/bin/sh
# session 50, call 3 (the planned full call never got a machine; this is what fitted the last device time): the
# GPU tests of the final build (test_cuda_decode: PDL on / off bit-identical and the page-locked logits;
# test_cuda_gemv), then tandem bench tg128 on the Qwen2.5-0.5B shape: old (session 49, 843ed12), new
# (the final build), new with TANDEM_CUDA_PINNED=0, one round.
R=$(pwd); OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" build /tmp/tb; A=$OUT/e.txt; P=$R/tmp/pk; W=/tmp/w
mkdir -p $W; T0=$(date +%s); st() { echo "== $1 at $(( $(date +%s) - T0 )) s" >> "$A"; }
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv >> "$A" 2>&1
mkdir -p $P && tar -C $P -xJf tmp/cuda50c.tar.xz
export LD_LIBRARY_PATH=$P/lib TM_SHARED=$P/shared TANDEM_GEMV=avx512
B=$P/bin
st tests
( timeout 40 $B/test_cuda_decode ) > $W/test_cuda_decode.txt 2>&1; grep -E "CHECK|passed|SKIP|PDL" $W/test_cuda_decode.txt | head -12 >> $A
( timeout 30 $B/test_cuda_gemv ) 2>&1 | grep -E "CHECK|passed|SKIP" | head -6 >> $A
st package
$B/tandem synth --like qwen2.5-0.5b -o /tmp/tb/q > /dev/null 2>> $A
$B/tandem convert /tmp/tb/q -o $R/tmp/q.tdm --threads 16 > /dev/null 2>> $A
st decode
for v in new old nopin; do
  x=$B/tandem; e=""
  case $v in old) x=$B/tandem_old;; nopin) e="TANDEM_CUDA_PINNED=0";; esac
  env $e timeout 40 $x bench $R/tmp/q.tdm -t 2 --tests tg128 --reps 3 --prefill cuda --decode cuda \
    --md $W/d-q-$v.md > $W/d-q-$v.json 2> $W/d-q-$v.err
  echo "q $v $(grep -E '^\| tg128' $W/d-q-$v.md | cut -d'|' -f4)" >> $A
done
st done
