#!/bin/sh
# session 53, call 4: test_cuda_split with its session check mended (tokens read by on_logprob with
# logprobs 0: call 3's read none), then the stall scenario on the Llama-1B shape with the shipped policy:
# the default (decode urgent) and --max-stall off (no stall bound: no priority), two rounds.
# Carried: tmp/cuda53d.tar.xz (bin/, lib/, shared/).
R=$(pwd); OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" build /tmp/tb; A=$OUT/a.txt; P=$R/tmp/pk; W=/tmp/w
mkdir -p $W $P; T0=$(date +%s); st() { echo "== $1 at $(( $(date +%s) - T0 )) s" >> "$A"; }
nvidia-smi --query-gpu=name,driver_version --format=csv >> "$A" 2>&1
tar -C $P -xJf tmp/cuda53d.tar.xz
export LD_LIBRARY_PATH=$P/lib TM_SHARED=$P/shared TANDEM_GEMV=avx512
B=$P/bin
st tests
( timeout 120 $B/test_cuda_split ) > $W/split.txt 2>&1; grep -vE "^ok " $W/split.txt | head -30 >> $A
st packages
$B/tandem synth --like llama-3.2-1b -o /tmp/tb/l > /dev/null 2>> $A
$B/tandem convert /tmp/tb/l -o /tmp/tb/l.tdm --threads 8 > /dev/null 2>> $A
st stall
for r in 1 2; do vs="def off"; [ $r = 2 ] && vs="off def"
  for v in $vs; do g=""; [ $v = off ] && g="--max-stall off"
  timeout 100 $B/tandem bench /tmp/tb/l.tdm -t 4 --tests '' --prefill cuda --decode cuda $g \
    --stall 4 --stall-prompt 4096 --reps 3 --json $W/s-l-$v-$r.json 2> $W/s-l-$v-$r.err
  echo "$r l $v $(grep -E '^stall' $W/s-l-$v-$r.err | head -1 | cut -c1-200)" >> $A
done; done
tar -C $W -czf $OUT/w.tgz .
st done
