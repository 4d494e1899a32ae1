#!/bin/sh
# session 47, call 2: llama.cpp's CUDA build finished (s47a.sh began it on the same held machine), llbench
# with every layer on the GPU (tools/llbench_gpu.h), Q4_0 models; then tandem bench with the peer beside
# it, interleaved: int4 (decode weights packed on the GPU, bf16 copy beside) against Q4_0, CUDA prefill
# and decode, on the Llama-3.2-1B and Qwen2.5-0.5B shapes; medians of 3.
R=$(pwd); OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"; A=$OUT/b.txt; L=$R/tmp/llb; P=$R/tmp/pk
T0=$(date +%s); st() { echo "== $1 at $(( $(date +%s) - T0 )) s" >> "$A"; }
export LD_LIBRARY_PATH=$P/lib LLB_MAX_FOREIGN=1
[ -d $L/b ] || { echo "no build from call 1" >> $A; exit 1; }
st ninja
( cd $L && timeout 300 ninja -C b -j 16 llama >> b.log 2>&1 ) || { tail -5 $L/b.log | cut -c1-200 >> $A; exit 1; }
gcc -O2 -include "$R/tools/llbench_gpu.h" -I $L/include -I $L/ggml/include $L/llbench.c -o $L/llbench \
    -L $L/b/bin -lllama -lggml -lggml-base -Wl,-rpath,$L/b/bin >> $A 2>&1 || exit 1
st quantize
for g in llama1b qwen05b; do $L/llbench quantize $L/models/$g-bf16.gguf $L/models/$g-q4_0.gguf q4_0 16 > /dev/null 2>> $A; done
st bench
for m in l q; do case $m in l) g=llama1b;; q) g=qwen05b;; esac
  [ $(( $(date +%s) - T0 )) -lt 420 ] || break
  timeout 150 $P/bin/tandem bench $R/tmp/$m.tdm -t 2 --tests pp512,tg128 --reps 3 --prefill cuda --decode cuda \
    --peer llama.cpp --peer-model $L/models/$g-q4_0.gguf --peer-bin $L/llbench --md "$OUT/$m-int4.md" \
    > "$OUT/$m-int4.json" 2>> $OUT/bench.err
  echo "-- $m: tandem int4 (packed + bf16 copy) vs llama.cpp Q4_0, both CUDA" >> $A; grep -E '^\| ' "$OUT/$m-int4.md" >> $A
  st "bench $m"
done
grep -iE "error|RESULT" $OUT/bench.err | head -20 | cut -c1-250 >> $A
