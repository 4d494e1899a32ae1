#!/bin/sh
# session 53, call 3: call 2 (s53b.sh) found the SM split slower for the running streams than both engines on
# the whole GPU; this build adds the decode engine's streams at the greatest priority (engine.h's urgent, the
# session's default where both roles share the GPU). test_cuda_split and test_cuda, then tandem bench's stall
# scenario (4 streams, a 4096-token prompt arrives) by mode: the default (whole GPU, decode urgent),
# TANDEM_CUDA_PRIORITY=0 (whole GPU, no priority: session 52's behaviour), --gpu-split 0.25 and 0.5; two rounds
# (the second reversed) on the Llama-1B shape, one on Qwen-0.5B's; the concurrency scenario by the first two.
# Carried: tmp/cuda53c.tar.xz (bin/, lib/, shared/).
R=$(pwd); OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" build /tmp/tb; A=$OUT/a.txt; P=$R/tmp/pk; W=/tmp/w
mkdir -p $W $P; T0=$(date +%s); st() { echo "== $1 at $(( $(date +%s) - T0 )) s" >> "$A"; }
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total,driver_version --format=csv >> "$A" 2>&1
tar -C $P -xJf tmp/cuda53c.tar.xz
export LD_LIBRARY_PATH=$P/lib TM_SHARED=$P/shared TANDEM_GEMV=avx512
B=$P/bin
st tests
( timeout 120 $B/test_cuda_split ) > $W/split.txt 2>&1; grep -vE "^ok " $W/split.txt | head -30 >> $A
( timeout 90 $B/test_cuda ) > $W/test_cuda.txt 2>&1; grep -E "CHECK|passed|SKIP|row" $W/test_cuda.txt | head -8 >> $A
st packages
for m in l q; do case $m in l) like=llama-3.2-1b;; q) like=qwen2.5-0.5b;; esac
  $B/tandem synth --like $like -o /tmp/tb/$m > /dev/null 2>> $A
  $B/tandem convert /tmp/tb/$m -o /tmp/tb/$m.tdm --threads 8 > /dev/null 2>> $A
done
one() { # model mode tag
  e=""; g=""; case $2 in p0) e="TANDEM_CUDA_PRIORITY=0";; s*) g="--gpu-split ${2#s}";; esac
  env $e timeout 100 $B/tandem bench /tmp/tb/$1.tdm -t 4 --tests '' --prefill cuda --decode cuda $g \
    --stall 4 --stall-prompt 4096 --reps 3 --json $W/s-$1-$2-$3.json --md $W/s-$1-$2-$3.md 2> $W/s-$1-$2-$3.err
  echo "$3 $1 $2 $(grep -E '^stall' $W/s-$1-$2-$3.err | head -1 | cut -c1-200)" >> $A
}
st stall
for v in def p0 s0.25 s0.5; do one l $v 1; done
for v in s0.5 s0.25 p0 def; do one l $v 2; done
for v in def p0; do one q $v 1; done
st concurrency
for v in def p0; do e=""; [ $v = p0 ] && e="TANDEM_CUDA_PRIORITY=0"
  env $e timeout 100 $B/tandem bench /tmp/tb/l.tdm -t 4 --tests '' --prefill cuda --decode cuda \
    --concurrency 8 --conc 1024+128 --gap 0.02 --json $W/c-$v.json --md $W/c-$v.md 2> $W/c-$v.err
  echo "$v $(grep -E '^concurrency' $W/c-$v.err | head -2 | tr '\n' ' ' | cut -c1-250)" >> $A
done
grep -ihE "error|fail" $W/*.err | head -8 | cut -c1-250 >> $A
tar -C $W -czf $OUT/w.tgz .
st done
