#!/bin/bash
# session 65's device call: the AVX-512 / AMX kernels' tests on the lent machine's Xeon, and the engines' bench
OUT=${OUT:-/tmp/out}; mkdir -p $OUT; A=$OUT/all.txt
T0=$(date +%s); st() { echo "== $1 at $(( $(date +%s) - T0 )) s" | tee -a $A; }
tar -xJf tmp/dd2.tar.xz
export LD_LIBRARY_PATH=$PWD/.devdeps/lib XDG_CACHE_HOME=/tmp/xdg TANDEM_GEMV=avx512
lscpu | grep -E "Model name|Thread|Core|L2|L3" >> $A; grep -o -w "avx512f\|avx512_vnni\|avx512_bf16\|amx_tile\|amx_int8\|gfni" /proc/cpuinfo | sort -u | tr '\n' ' ' >> $A; echo >> $A
st build
sh .devdeps/build.sh build/tandem build/tests/test_kernels build/tests/test_attn build/tests/test_engine > /tmp/build.log 2>&1 || { tail -30 /tmp/build.log >> $A; exit 1; }
grep -c warning /tmp/build.log >> $A
st tests
( timeout 150 build/tests/test_kernels 2>&1 | grep -iE "FAIL|passed|SKIP" | tail -12
  timeout 150 build/tests/test_attn 2>&1 | grep -iE "FAIL|passed|SKIP" | tail -6
  timeout 240 build/tests/test_engine 2>&1 | grep -iE "FAIL|passed" | tail -6 ) >> $A 2>&1
st synth
mkdir -p /tmp/m
for p in qwen2.5-0.5b:qwen llama-3.2-1b:llama; do
  build/tandem synth --like ${p%%:*} -o /tmp/m/${p##*:} > /dev/null 2>&1 && build/tandem convert /tmp/m/${p##*:} -o /tmp/m/${p##*:}.tdm --threads 16 > /dev/null 2>> $A
done
st bench
for r in 1 2; do for t in qwen llama; do
  timeout 150 build/tandem bench /tmp/m/$t.tdm -t 2 --tests pp512,tg128 --reps 3 --ceilings > $OUT/$t-r$r.json 2>> $A
done; done
st profile
TANDEM_PROFILE=warm timeout 60 build/tandem bench /tmp/m/qwen.tdm -t 2 --tests pp512 --reps 2 --ceilings 2>&1 >/dev/null | grep -E "profile: prefill|bench rep|ceilings" >> $A
st done
