#!/bin/sh
# session 52, call 1: the GPU tests of ea477e4's mended GEMV (bin/tandem, test_cuda_decode) and of ea477e4 +
# docs/bench/scripts-s51/res-preload.diff (bin/tandem_pre, test_cuda_decode_pre); tg128 by variant: new (the
# blocks-per-SM rule), new1 / new0 (TANDEM_CUDA_FUSE_RES=1 / 0), pre, pre1, two rounds (the second reversed);
# s52b.sh (the transformers fixtures and template renders) beside it. llama.cpp was left out: little device
# time was left after a run of refused starts. Carried: tmp/cuda52a.tar.xz (bin/, lib/, shared/).
R=$(pwd); OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" build /tmp/tb; A=$OUT/a.txt; P=$R/tmp/pk; W=/tmp/w
mkdir -p $W $P; T0=$(date +%s); st() { echo "== $1 at $(( $(date +%s) - T0 )) s" >> "$A"; }
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total,driver_version --format=csv >> "$A" 2>&1
sh docs/bench/scripts-s52/s52b.sh > $OUT/runb.txt 2>&1 &
SB=$!
tar -C $P -xJf tmp/cuda52a.tar.xz
export LD_LIBRARY_PATH=$P/lib TM_SHARED=$P/shared TANDEM_GEMV=avx512
B=$P/bin
st tests
for t in test_cuda_decode test_cuda_decode_pre; do
  ( timeout 150 $B/$t ) > $W/$t.txt 2>&1; echo "-- $t" >> $A
  grep -E "CHECK|passed|SKIP|FUSE_RES|argmax kernel" $W/$t.txt | head -30 >> $A
done
( timeout 60 $B/test_cuda ) > $W/test_cuda.txt 2>&1; grep -E "CHECK|passed|SKIP" $W/test_cuda.txt | head -8 >> $A
st packages
for m in l q; do case $m in l) like=llama-3.2-1b;; q) like=qwen2.5-0.5b;; esac
  $B/tandem synth --like $like -o /tmp/tb/$m > /dev/null 2>> $A
  $B/tandem convert /tmp/tb/$m -o /tmp/tb/$m.tdm --threads 4 > /dev/null 2>> $A
done
wait $SB
st decode
for r in 1 2; do vs="new new1 new0 pre pre1"; [ $r = 2 ] && vs="pre1 pre new0 new1 new"
  for m in l q; do for v in $vs; do
  x=$B/tandem; e=""; case $v in pre*) x=$B/tandem_pre;; esac
  case $v in *1) e="TANDEM_CUDA_FUSE_RES=1";; *0) e="TANDEM_CUDA_FUSE_RES=0";; esac
  env $e timeout 60 $x bench /tmp/tb/$m.tdm -t 2 --tests tg128 --reps 3 --prefill cuda --decode cuda \
    --md $W/d-$m-$v-$r.md > $W/d-$m-$v-$r.json 2>> $W/bench.err
  echo "$r $m $v $(grep -E '^\| tg128' $W/d-$m-$v-$r.md | cut -d'|' -f4)" >> $A
done; done; done
grep -iE "error" $W/bench.err | head -5 | cut -c1-250 >> $A
tar -C $W -czf $OUT/w.tgz .
st done
