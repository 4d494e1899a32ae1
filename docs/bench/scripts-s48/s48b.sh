#!/bin/sh
# session 48, call 2 (the machine of call 1, still held): llama.cpp's CUDA build finished, llbench with every
# layer on the GPU (tools/llbench_gpu.h), Q4_0 GGUFs; then
#   1. the prefill attention, the session-46 build (bin/tandem-old, wmma with O in shared memory) against this
#      one (FlashAttention-2 style), interleaved by round: pp512 .. pp16384 on the Llama-3.2-1B shape;
#   2. tandem bench with the peer beside it, interleaved rep by rep: int4 decode weights (packed on the GPU,
#      the bf16 copy beside them) against Q4_0, the GPU prefilling and decoding, both shapes, medians of 3.
# Carried: tmp/old48.tar.xz (bin/tandem-old); tmp/pk, tmp/llb, tmp/*.tdm are call 1's.
R=$(pwd); OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"; A=$OUT/b.txt; L=$R/tmp/llb; P=$R/tmp/pk; W=/tmp/w; mkdir -p $W
T0=$(date +%s); st() { echo "== $1 at $(( $(date +%s) - T0 )) s" >> "$A"; }
export LD_LIBRARY_PATH=$P/lib LLB_MAX_FOREIGN=1
[ -d $L/b ] && [ -x $P/bin/tandem ] || { echo "no state from call 1" >> $A; exit 1; }
tar -C $P -xJf tmp/old48.tar.xz
B=$P/bin
st ninja
( cd $L && timeout 330 ninja -C b -j 16 llama >> b.log 2>&1; echo "ninja rc $?" >> b.log ) ; tail -2 $L/b.log | cut -c1-200 >> $A
gcc -O2 -include "$R/tools/llbench_gpu.h" -I $L/include -I $L/ggml/include $L/llbench.c -o $L/llbench \
    -L $L/b/bin -lllama -lggml -lggml-base -Wl,-rpath,$L/b/bin >> $A 2>&1
for g in llama1b qwen05b; do [ -x $L/llbench ] && $L/llbench quantize $L/models/$g-bf16.gguf $L/models/$g-q4_0.gguf q4_0 16 > /dev/null 2>> $A; done
st attention
for r in 1 2; do for v in old new; do
  b=$B/tandem; [ $v = old ] && b=$B/tandem-old
  TANDEM_CUDA_PROFILE=1 timeout 60 $b bench $R/tmp/l.tdm -t 2 --tests pp512,pp2048,pp8192,pp16384 --reps 1 --prefill cuda \
    --decode cuda --md $W/att-$v-$r.md > $W/att-$v-$r.json 2> $W/att-$v-$r.err
  echo "-- round $r, $v" >> $A; grep -E '^\| ' $W/att-$v-$r.md | grep -v -- '---' >> $A
  grep -iE "attention" $W/att-$v-$r.err | head -2 | cut -c1-200 >> $A
done; done
st peer
for m in l q; do case $m in l) g=llama1b;; q) g=qwen05b;; esac
  [ -x $L/llbench ] && [ $(( $(date +%s) - T0 )) -lt 480 ] || break
  timeout 110 $B/tandem bench $R/tmp/$m.tdm -t 2 --tests pp512,pp4096,tg128 --reps 3 --prefill cuda --decode cuda \
    --peer llama.cpp --peer-model $L/models/$g-q4_0.gguf --peer-bin $L/llbench --md $W/p-$m.md > $W/p-$m.json 2>> $W/bench.err
  echo "-- $m: tandem int4 (packed + bf16 copy) vs llama.cpp Q4_0, both CUDA" >> $A; grep -E '^\| ' $W/p-$m.md >> $A
  st "peer $m"
done
grep -iE "error|RESULT|dropped" $W/bench.err | head -20 | cut -c1-250 >> $A
tar -C $W -czf $OUT/w.tgz .
st done
