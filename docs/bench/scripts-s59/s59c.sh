#!/bin/sh
# Session 59, call 3, PREPARED AND NOT RUN (too little device time was left to start a machine): dec-mma-merge.diff
# applied (the grouped decode attention's
# merge over only the segments that hold keys, at most 32 of them, a warp a head for the weights; the grouped
# kernel on by default), built and packed as tmp/cuda59d.tar.xz (its tests, llama3 only). The decode tests
# (test_cuda_decode runs both kernels), test_cuda, then one round of tg128 / e4000+96 with TANDEM_CUDA_DEC_MMA=1 and
# =0 (the same binary) on the DeepSeek-V2-Lite shape (4 layers) and the Llama-3.2-1B shape. Carried: cuda59d.
. tools/device-lib.sh
dev_init e.txt ${PK:-cuda59d}
st tests
( timeout 90 $B/test_cuda_decode ) > $W/dec.txt 2>&1; grep -E "CHECK|passed|SKIP|^--" $W/dec.txt | head -12 >> $A
( timeout 40 $B/test_cuda ) > $W/cuda.txt 2>&1; grep -E "CHECK|passed|SKIP" $W/cuda.txt | head -6 >> $A
st models
$B/tandem synth --like deepseek-v2-lite --layers 4 -o /tmp/tb/d > /dev/null 2>> $A
$B/tandem convert /tmp/tb/d -o /tmp/tb/d.tdm --threads 8 > $W/convert.txt 2>&1; tail -1 $W/convert.txt >> $A
$B/tandem synth --like llama-3.2-1b -o /tmp/tb/l > /dev/null 2>> $A
$B/tandem convert /tmp/tb/l -o /tmp/tb/l.tdm --threads 8 > $W/convert-l.txt 2>&1; tail -1 $W/convert-l.txt >> $A
st ab
for m in d l; do for k in 1 0; do
  TANDEM_CUDA_DEC_MMA=$k timeout 40 $B/tandem bench /tmp/tb/$m.tdm -t 4 --tests tg128,e4000+96 --reps 3 --prefill cuda \
    --decode cuda --md $W/ab-$m-$k.md > /dev/null 2>> $W/bench.err
  echo "$m mma=$k: $(grep -E '^\| (tg|e)' $W/ab-$m-$k.md | cut -d'|' -f2,4,5 | tr '\n' ' ')" >> $A
done; done
grep -iE "error|fail" $W/bench.err | head -4 | cut -c1-250 >> $A
cd $W && tar -czf $OUT/e.tar.gz ab-*.md dec.txt cuda.txt 2>/dev/null
st done
