#!/bin/sh
# session 53, calls 1 and 2 (call 1 ran this script as s53a.sh with tmp/cuda53a.tar.xz, the build whose green-context
# entry points were asked for at CUDA 12.4's interface: no split opened, every mode ran unsplit): the GPU split
# between the roles (engine/cuda/cu_smset.h) on the lent GPU: its test
# (test_cuda_split, with the part's context made current around calls and without:
# TANDEM_CUDA_GREEN_CURRENT=0), the CUDA engine's tests (test_cuda, test_cuda_decode), then tandem bench's
# stall scenario (4 streams decoding, a 4096-token prompt arrives) with --prefill cuda --decode cuda, the
# split off and at 0.25 / 0.5 / 0.75 of the SMs for the prefill, two rounds (the second reversed), and the
# concurrency scenario off / 0.5. Carried: tmp/cuda53b.tar.xz (bin/, lib/, shared/).
R=$(pwd); OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" build /tmp/tb; A=$OUT/a.txt; P=$R/tmp/pk; W=/tmp/w
mkdir -p $W $P; T0=$(date +%s); st() { echo "== $1 at $(( $(date +%s) - T0 )) s" >> "$A"; }
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total,driver_version --format=csv >> "$A" 2>&1
tar -C $P -xJf tmp/cuda53b.tar.xz
export LD_LIBRARY_PATH=$P/lib TM_SHARED=$P/shared TANDEM_GEMV=avx512
B=$P/bin
st tests
( timeout 120 $B/test_cuda_split ) > $W/split.txt 2>&1; grep -vE "^ok " $W/split.txt | head -30 >> $A
( TANDEM_CUDA_GREEN_CURRENT=0 timeout 120 $B/test_cuda_split ) > $W/split0.txt 2>&1
echo "-- GREEN_CURRENT=0:" >> $A; grep -vE "^ok " $W/split0.txt | head -20 >> $A
( timeout 150 $B/test_cuda_decode ) > $W/test_cuda_decode.txt 2>&1
grep -E "CHECK|passed|SKIP" $W/test_cuda_decode.txt | head -20 >> $A
( timeout 90 $B/test_cuda ) > $W/test_cuda.txt 2>&1; grep -E "CHECK|passed|SKIP" $W/test_cuda.txt | head -8 >> $A
st packages
for m in l q; do case $m in l) like=llama-3.2-1b;; q) like=qwen2.5-0.5b;; esac
  $B/tandem synth --like $like -o /tmp/tb/$m > /dev/null 2>> $A
  $B/tandem convert /tmp/tb/$m -o /tmp/tb/$m.tdm --threads 8 > /dev/null 2>> $A
done
st stall
for r in 1 2; do vs="off 0.5 0.25 0.75"; [ $r = 2 ] && vs="0.75 0.25 0.5 off"
  for v in $vs; do
  timeout 100 $B/tandem bench /tmp/tb/l.tdm -t 4 --tests '' --prefill cuda --decode cuda --gpu-split $v \
    --stall 4 --stall-prompt 4096 --reps 3 --json $W/s-l-$v-$r.json --md $W/s-l-$v-$r.md 2> $W/s-l-$v-$r.err
  echo "$r l $v $(grep -E '^stall' $W/s-l-$v-$r.err | head -1 | cut -c1-200)" >> $A
done; done
for v in off 0.5; do
  timeout 100 $B/tandem bench /tmp/tb/q.tdm -t 4 --tests '' --prefill cuda --decode cuda --gpu-split $v \
    --stall 4 --stall-prompt 4096 --reps 3 --json $W/s-q-$v.json --md $W/s-q-$v.md 2> $W/s-q-$v.err
  echo "1 q $v $(grep -E '^stall' $W/s-q-$v.err | head -1 | cut -c1-200)" >> $A
done
st concurrency
for v in off 0.5; do
  timeout 100 $B/tandem bench /tmp/tb/l.tdm -t 4 --tests '' --prefill cuda --decode cuda --gpu-split $v \
    --concurrency 8 --conc 1024+128 --gap 0.02 --json $W/c-$v.json --md $W/c-$v.md 2> $W/c-$v.err
  echo "$v $(grep -E '^concurrency' $W/c-$v.err | head -2 | tr '\n' ' ' | cut -c1-250)" >> $A
done
grep -ihE "error|fail" $W/*.err | head -8 | cut -c1-250 >> $A
tar -C $W -czf $OUT/w.tgz .
st done
