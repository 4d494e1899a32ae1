#!/bin/bash
# session 14, run 63: the shipped code (HEAD 0fae1d1) beside llama.cpp Q4_0: Qwen twice, Llama
R=$(pwd); OUT=${OUT:-/tmp/out}; mkdir -p $OUT; A=$OUT/all63.txt
export LD_LIBRARY_PATH=$R/.devdeps/lib
T0=$(date +%s); st() { echo "== $1 at $(( $(date +%s) - T0 )) s" | tee -a $A; }
lscpu | grep -iE "model name|MHz" | cut -c1-120 >> $A
st build
P=.devdeps/peer; mkdir -p /tmp/gg
( for m in qwen05b llama1b; do PYTHONPATH=$P/gguf-py timeout 200 python3 $P/make_synth_gguf.py /tmp/gg $m > /tmp/gguf-$m.log 2>&1
  LD_LIBRARY_PATH=$P/lib LLB_BACKEND_DIR=$P/lib $P/llbench quantize /tmp/gg/$m-bf16.gguf /tmp/gg/$m-q4_0.gguf q4_0 6 >> /tmp/gguf-$m.log 2>&1; rm -f /tmp/gg/$m-bf16.gguf; done ) &
GG=$!
sh .devdeps/build.sh build/tandem > /tmp/build.log 2>&1 || { tail -40 /tmp/build.log | tee -a $A; exit 1; }
NEW=$R/build; mkdir -p /tmp/tb
for m in qwen2.5-0.5b:q llama-3.2-1b:l; do build/tandem synth --like ${m%%:*} -o /tmp/tb/${m##*:} > /dev/null
  build/tandem convert /tmp/tb/${m##*:} -o /tmp/tb/${m##*:}.tdm --threads 8 > /dev/null 2>> $A

  rm -rf /tmp/tb/${m##*:}; done
wait $GG; tail -1 /tmp/gguf-qwen05b.log >> $A
st bench
export LLB_BACKEND_DIR=$R/.devdeps/peer/lib LLB_MAX_FOREIGN=1000
BL="$R/.devdeps/lib:$R/.devdeps/peer/lib"
b() { LD_LIBRARY_PATH=$BL timeout 150 $NEW/tandem bench /tmp/tb/$1.tdm -t 2 --tests $3 --reps 3 --ceilings --peer llama.cpp --peer-model /tmp/gg/$2-q4_0.gguf --peer-bin $R/.devdeps/peer/llbench --md $OUT/r63-$1-$4.md > $OUT/r63-$1-$4.json 2>> $A; echo "NEW+peer $1 $4: $(grep -E '^\| (pp512|tg128)' $OUT/r63-$1-$4.md | tr '\n' ' ')" >> $A; }
left() { [ $(( $(date +%s) - T0 )) -lt $1 ]; }
b q qwen05b pp512,tg128 1
left 250 && b l llama1b pp512,tg128 1
left 300 && b q qwen05b pp512,tg128 2
st done
