#!/bin/sh
# session 54, call 4: where a Qwen3-30B-A3B-shaped prefill chunk's mixture-of-experts layers spend their time (call 3:
# pp512 at 0.20x llama.cpp's, with or without the batched GEMMs). TANDEM_CUDA_MOE_TIMES=1 times each call's phases with
# the stream drained between them (cu_moe.h); TANDEM_CUDA_PROFILE=1 the engine's own categories. 8 of 48 layers, as
# calls 1-3. Carried: tmp/cuda54d.tar.xz (bin/tandem, lib/).
R=$(pwd); OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/tb; A=$OUT/a.txt; P=$R/tmp/pk; W=/tmp/w
mkdir -p $W $P; T0=$(date +%s); st() { echo "== $1 at $(( $(date +%s) - T0 )) s" >> "$A"; }
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv >> "$A" 2>&1
tar -C $P -xJf tmp/cuda54d.tar.xz
export LD_LIBRARY_PATH=$P/lib TANDEM_GEMV=avx512
B=$P/bin
$B/tandem synth --like qwen3-30b-a3b --layers 8 -o /tmp/tb/q > /dev/null 2>> $A
$B/tandem convert /tmp/tb/q -o /tmp/tb/q.tdm --threads 12 > $W/convert.txt 2>&1
st bench
for b in 16 0; do for r in 1 2; do
  TANDEM_CUDA_MOE_TIMES=1 TANDEM_CUDA_MOE_BATCHED=$b timeout 60 $B/tandem bench /tmp/tb/q.tdm -t 4 --tests pp512 \
    --reps 3 --prefill cuda --decode cuda --md $W/t-$b-$r.md > /dev/null 2> $W/t-$b-$r.txt
  echo "batched=$b round $r: $(grep -E '^\| pp' $W/t-$b-$r.md | cut -d'|' -f2,4)" >> $A
  grep "cuda moe times" $W/t-$b-$r.txt >> $A
done; done
TANDEM_CUDA_PROFILE=1 timeout 60 $B/tandem bench /tmp/tb/q.tdm -t 4 --tests pp512,tg128 --reps 3 --prefill cuda \
    --decode cuda --md $W/p.md > /dev/null 2> $W/p.txt
grep -E "^\| (pp|tg)" $W/p.md >> $A; grep "cuda profile" $W/p.txt | cut -c1-400 >> $A
TANDEM_CUDA_MOE_TIMES=1 timeout 60 $B/tandem bench /tmp/tb/q.tdm -t 4 --tests pp128,pp2048 --reps 2 --prefill cuda \
    --decode cuda --md $W/l.md > /dev/null 2> $W/l.txt
grep -E "^\| pp" $W/l.md >> $A; grep "cuda moe times" $W/l.txt >> $A
st done
