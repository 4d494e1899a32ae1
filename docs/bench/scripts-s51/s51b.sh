#!/bin/sh
# session 51, call 2: why the GEMV's residual epilogue (res_step) gained on the Llama-1B shape (call 1: tg128 928
# against 895 t/s unfused) and lost on Qwen2.5-0.5B (1063 against 1114). tg128 by variant, interleaved, 2 rounds
# (the second of fe, fl, nf only, in the reverse order):
#   fe  the default (fused; PDL's trigger at the GEMV's start, as every GEMV)
#   fl  TANDEM_CUDA_FUSE_RES=late (fused; the trigger once a block's rows are stored)
#   nf  TANDEM_CUDA_FUSE_RES=0 (the residual pass of its own)
#   fo, fd  TANDEM_CUDA_FUSE_RES=o / down: only the output / the down projection's fused
# Carried: tmp/cuda51c.tar.xz (bin/tandem, lib/).
R=$(pwd); OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" build /tmp/tb; A=$OUT/a.txt; P=$R/tmp/pk; W=/tmp/w
mkdir -p $W $P; T0=$(date +%s); st() { echo "== $1 at $(( $(date +%s) - T0 )) s" >> "$A"; }
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total,driver_version --format=csv >> "$A" 2>&1
tar -C $P -xJf tmp/cuda51c.tar.xz
export LD_LIBRARY_PATH=$P/lib TANDEM_GEMV=avx512
B=$P/bin
st packages
for m in l q; do case $m in l) like=llama-3.2-1b;; q) like=qwen2.5-0.5b;; esac
  $B/tandem synth --like $like -o /tmp/tb/$m > /dev/null 2>> $A
  $B/tandem convert /tmp/tb/$m -o /tmp/tb/$m.tdm --threads 8 > /dev/null 2>> $A &
done
wait
st decode
for r in 1 2; do vs="fe fl nf fo fd"; [ $r = 2 ] && vs="nf fl fe"
for m in l q; do for v in $vs; do
  case $v in fe) e="";; fl) e="TANDEM_CUDA_FUSE_RES=late";; nf) e="TANDEM_CUDA_FUSE_RES=0";;
    fo) e="TANDEM_CUDA_FUSE_RES=o";; fd) e="TANDEM_CUDA_FUSE_RES=down";; esac
  env $e timeout 60 $B/tandem bench /tmp/tb/$m.tdm -t 2 --tests tg128 --reps 3 --prefill cuda --decode cuda \
    --md $W/d-$m-$v-$r.md > $W/d-$m-$v-$r.json 2>> $W/bench.err
  echo "$r $m $v $(grep -E '^\| tg128' $W/d-$m-$v-$r.md | cut -d'|' -f4)" >> $A
done; done; done
grep -iE "error" $W/bench.err | head -5 | cut -c1-250 >> $A
tar -C $W -czf $OUT/w.tgz .
st done
