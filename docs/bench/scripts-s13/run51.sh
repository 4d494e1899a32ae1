#!/bin/bash
# session 13, run 51: (a) kbench int4 B=8 896x4864 with x spans of 16/32 (shipped)/64 KB, and B=1 shapes;
# (b) first request's prompt time in a fresh `tandem run` (KV prefault) base vs new (the prompt:
#     docs/bench/scripts-s13/p500.txt copied to .devdeps/, 521 tokens with the synthetic Qwen tokenizer);
# (c) pp512 + tg128 beside llama.cpp Q4_0 (new), tg128 of the base build interleaved.
R=$(pwd); OUT=${OUT:-/tmp/out}; mkdir -p $OUT; A=$OUT/all51.txt
export LD_LIBRARY_PATH=$R/.devdeps/lib
T0=$(date +%s); st() { echo "== $1 at $(( $(date +%s) - T0 )) s" | tee -a $A; }
lscpu | grep -iE "model name|L1d|L2|L3" >> $A
st build
P=.devdeps/peer; mkdir -p /tmp/gg
( for m in qwen05b llama1b; do PYTHONPATH=$P/gguf-py timeout 200 python3 $P/make_synth_gguf.py /tmp/gg $m > /tmp/gguf-$m.log 2>&1
  LD_LIBRARY_PATH=$P/lib LLB_BACKEND_DIR=$P/lib $P/llbench quantize /tmp/gg/$m-bf16.gguf /tmp/gg/$m-q4_0.gguf q4_0 6 >> /tmp/gguf-$m.log 2>&1; rm -f /tmp/gg/$m-bf16.gguf; done ) &
GG=$!
sh .devdeps/build.sh build/tandem build/kbench > /tmp/build.log 2>&1 || { tail -40 /tmp/build.log | tee -a $A; exit 1; }
D=$R/.devdeps
( cd .devdeps/s13base && make -j16 CC="gcc -I$D/include -I$D/include/cjson -L$D/lib -Wl,-rpath,$D/lib" build/tandem > /tmp/build0.log 2>&1 ) || { tail -20 /tmp/build0.log | tee -a $A; exit 1; }
for L in 16384 65536; do sh .devdeps/build.sh BUILD=/tmp/bl$L CFLAGS="-O2 -g -DQ4_X_L1=$L" /tmp/bl$L/kbench > /tmp/bl.log 2>&1 || tail -5 /tmp/bl.log >> $A; done
NEW=$R/build; OLD=$R/.devdeps/s13base/build
mkdir -p /tmp/tb
for m in qwen2.5-0.5b:q llama-3.2-1b:l; do build/tandem synth --like ${m%%:*} -o /tmp/tb/${m##*:} > /dev/null
  build/tandem convert /tmp/tb/${m##*:} -o /tmp/tb/${m##*:}.tdm --threads 8 > /dev/null 2>> $A
  [ ${m##*:} = q ] && build/tandem convert /tmp/tb/q -o /tmp/tb/q-h6.tdm --head-enc int6g64 --threads 8 > /dev/null 2>> $A
  rm -rf /tmp/tb/${m##*:}; done
st kbench
for round in 1 2 3; do
  for b in /tmp/bl16384 $NEW /tmp/bl65536; do echo "r$round $b 896x4864 B8: $($b/kbench -t 2 -s 0.3 -v avx512 gemv int4g64 896 4864 8 2>&1 | head -1 | grep -o 'ok .*')" >> $A; done
  echo "r$round new 896x896 B1: $($NEW/kbench -t 2 -s 0.3 -v avx512 gemv int4g64 896 896 1 2>&1 | head -1 | grep -o 'ok .*')" >> $A
done
st ttft
for round in 1 2 3 4; do for v in OLD NEW; do eval d=\$$v
  echo "r$round $v run: $($d/tandem run /tmp/tb/q.tdm -f .devdeps/p500.txt -n 1 -t 2 2>&1 >/dev/null | grep -oE 'prompt: [0-9]+ tokens in [0-9.]+ s')" >> $A; done; done
wait $GG; tail -1 /tmp/gguf-qwen05b.log >> $A
st bench
export LLB_BACKEND_DIR=$R/.devdeps/peer/lib LLB_MAX_FOREIGN=1000
BL="$R/.devdeps/lib:$R/.devdeps/peer/lib"
b() { LD_LIBRARY_PATH=$BL timeout 150 $NEW/tandem bench /tmp/tb/$1.tdm -t 2 --tests $3 --reps 3 --ceilings --peer llama.cpp --peer-model /tmp/gg/$2-q4_0.gguf --peer-bin $R/.devdeps/peer/llbench --md $OUT/r51-$1-$4.md > $OUT/r51-$1-$4.json 2>> $A; echo "NEW+peer $1 $4: $(grep -E '^\| (pp512|tg128)' $OUT/r51-$1-$4.md | tr '\n' ' ')" >> $A; }
o() { echo "OLD $1: $(timeout 100 $OLD/tandem bench /tmp/tb/$1.tdm -t 2 --tests tg128 --reps 3 2>/dev/null | grep -o '"tokens_per_s": [0-9.]*')" >> $A; }
left() { [ $(( $(date +%s) - T0 )) -lt $1 ]; }
b q qwen05b pp512,tg128 1; o q
left 430 && { b l llama1b pp512,tg128 1; o l; }
left 480 && { b q-h6 qwen05b tg128 1; o q; }
left 520 && { b q qwen05b tg128 2; }
st done
