#!/bin/bash
# session 65's second device call: test_kernels on AVX-512 / AMX after the NaN fix, and both shapes beside llama.cpp
OUT=${OUT:-/tmp/out}; mkdir -p $OUT; A=$OUT/all2.txt; R=$(pwd)
T0=$(date +%s); st() { echo "== $1 at $(( $(date +%s) - T0 )) s" | tee -a $A; }
tar -xJf tmp/dd2.tar.xz; tar -xJf tmp/peer.tar.xz
export LD_LIBRARY_PATH=$R/.devdeps/lib XDG_CACHE_HOME=/tmp/xdg TANDEM_GEMV=avx512
lscpu | grep -E "Model name" >> $A
P=.devdeps/peer; mkdir -p /tmp/gg
( for g in qwen05b llama1b; do PYTHONPATH=$P/gguf-py timeout 250 python3 $P/make_synth_gguf.py /tmp/gg $g > /tmp/gguf.log 2>&1
  LD_LIBRARY_PATH=$P/lib LLB_BACKEND_DIR=$P/lib $P/llbench quantize /tmp/gg/$g-bf16.gguf /tmp/gg/$g-q4_0.gguf q4_0 8 >> /tmp/gguf.log 2>&1; rm -f /tmp/gg/$g-bf16.gguf; done ) &
GG=$!
st build
sh .devdeps/build.sh build/tandem build/tests/test_kernels > /tmp/build.log 2>&1 || { tail -30 /tmp/build.log >> $A; exit 1; }
st tests
timeout 150 build/tests/test_kernels 2>&1 | grep -iE "FAIL|passed" | tail -8 >> $A
st synth
mkdir -p /tmp/m
for p in qwen2.5-0.5b:qwen llama-3.2-1b:llama; do
  build/tandem synth --like ${p%%:*} -o /tmp/m/${p##*:} > /dev/null 2>&1 && build/tandem convert /tmp/m/${p##*:} -o /tmp/m/${p##*:}.tdm --threads 8 > /dev/null 2>> $A
done
wait $GG; tail -2 /tmp/gguf.log >> $A; ls -la /tmp/gg >> $A
st bench
export LLB_BACKEND_DIR=$R/$P/lib LLB_MAX_FOREIGN=1000
for r in 1 2; do for s in qwen:qwen05b llama:llama1b; do t=${s%%:*}; g=${s##*:}
  LD_LIBRARY_PATH=$R/.devdeps/lib:$R/$P/lib timeout 200 build/tandem bench /tmp/m/$t.tdm -t 2 --tests pp512,tg128 --reps 3 --ceilings \
    --peer llama.cpp --peer-model /tmp/gg/$g-q4_0.gguf --peer-bin $R/$P/llbench > $OUT/$t-peer-r$r.json 2>> $A
done; done
st done
