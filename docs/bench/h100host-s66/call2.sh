#!/bin/bash
# session 66's second device call (short: the device budget was mostly spent on failed starts): the fused
# gate/up GEMM with the lean SiLU against the old epilogue in one process (kbench-ab ffn -a 1, rounds in
# turn), then both shapes beside llama.cpp (tandem bench --peer), one invocation each
OUT=${OUT:-/tmp/out}; mkdir -p $OUT; A=$OUT/all2.txt; R=$(pwd)
T0=$(date +%s); st() { echo "== $1 at $(( $(date +%s) - T0 )) s" | tee -a $A; }
tar -xJf tmp/dd2.tar.xz; tar -xJf tmp/peer.tar.xz
export LD_LIBRARY_PATH=$R/.devdeps/lib TANDEM_GEMV=avx512
lscpu | grep -E "Model name|Core|L3" >> $A
P=.devdeps/peer; mkdir -p /tmp/gg
( for g in qwen05b llama1b; do PYTHONPATH=$P/gguf-py timeout 250 python3 $P/make_synth_gguf.py /tmp/gg $g > /tmp/gguf.log 2>&1
  LD_LIBRARY_PATH=$P/lib LLB_BACKEND_DIR=$P/lib $P/llbench quantize /tmp/gg/$g-bf16.gguf /tmp/gg/$g-q4_0.gguf q4_0 8 >> /tmp/gguf.log 2>&1; rm -f /tmp/gg/$g-bf16.gguf; done ) &
GG=$!
st build
sh .devdeps/build.sh build/tandem kbench-ab AMX_ALT=-DAMX_SILU_LEAN=0 > /tmp/build.log 2>&1 ||
  { tail -30 /tmp/build.log >> $A; exit 1; }
st synth
mkdir -p /tmp/m
for p in qwen2.5-0.5b:qwen llama-3.2-1b:llama; do
  build/tandem synth --like ${p%%:*} -o /tmp/m/${p##*:} > /dev/null 2>&1 && build/tandem convert /tmp/m/${p##*:} -o /tmp/m/${p##*:}.tdm --threads 6 > /dev/null 2>> $A
done
st kbench
for s in "512 4864 896" "512 8192 2048"; do
  echo "lean (shipped) against the old epilogue (alternative), ffn $s" >> $A
  timeout 60 build/kbench-ab -t 2 -s 0.1 -p 11 -a 1 ffn $s >> $A 2>&1
done
st "wait gguf"
wait $GG; tail -2 /tmp/gguf.log >> $A; ls -la /tmp/gg >> $A
st bench
export LLB_BACKEND_DIR=$R/$P/lib LLB_MAX_FOREIGN=1000
peer() { for s in qwen:qwen05b llama:llama1b; do t=${s%%:*}; g=${s##*:}
  XDG_CACHE_HOME=/tmp/xdg LD_LIBRARY_PATH=$R/.devdeps/lib:$R/$P/lib timeout 150 build/tandem bench /tmp/m/$t.tdm -t 2 --tests pp512,tg128 --reps 3 --ceilings \
    --peer llama.cpp --peer-model /tmp/gg/$g-q4_0.gguf --peer-bin $R/$P/llbench > $OUT/$t-peer-r$1.json 2> /tmp/e.txt
  grep -E "bench rep|ratio|peer|llama" /tmp/e.txt | head -30 | sed "s|^|$t r$1: |" >> $A
done; }
peer 1
st done
