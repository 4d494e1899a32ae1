#!/bin/bash
# session 66's first device call: the AVX-512 / AMX kernels' tests with the lean SiLU epilogue
# (AMX_SILU_LEAN), then the engine's pp512 with it and without (-DAMX_SILU_LEAN=0) interleaved,
# each rep's GEMMs paired with the tile peak beside it (--ceilings), and both builds' profiles
OUT=${OUT:-/tmp/out}; mkdir -p $OUT; A=$OUT/all.txt
T0=$(date +%s); st() { echo "== $1 at $(( $(date +%s) - T0 )) s" | tee -a $A; }
tar -xJf tmp/dd2.tar.xz
export LD_LIBRARY_PATH=$PWD/.devdeps/lib TANDEM_GEMV=avx512
lscpu | grep -E "Model name|Core|L2|L3" >> $A; grep -o -w "avx512f\|amx_tile\|amx_int8" /proc/cpuinfo | sort -u | tr '\n' ' ' >> $A; echo >> $A
st build
( sh .devdeps/build.sh build/tandem build/tests/test_kernels > /tmp/build.log 2>&1 &&
  sh .devdeps/build.sh BUILD=build-alt CFLAGS="-O2 -g -DAMX_SILU_LEAN=0" build-alt/tandem > /tmp/build2.log 2>&1 ) ||
  { tail -30 /tmp/build.log /tmp/build2.log >> $A; exit 1; }
grep -c "warning" /tmp/build.log >> $A
st tests
XDG_CACHE_HOME=/tmp/xdgt timeout 200 build/tests/test_kernels > $OUT/test_kernels.txt 2>&1; echo "rc $?" >> $A
grep -iE "FAIL|passed" $OUT/test_kernels.txt | tail -12 >> $A
st synth
mkdir -p /tmp/m
for p in qwen2.5-0.5b:qwen llama-3.2-1b:llama; do
  build/tandem synth --like ${p%%:*} -o /tmp/m/${p##*:} > /dev/null 2>&1 && build/tandem convert /tmp/m/${p##*:} -o /tmp/m/${p##*:}.tdm --threads 16 > /dev/null 2>> $A
done
st ab
for r in 1 2 3 4; do
  for b in build build-alt; do
    [ $(( r % 2 )) = 0 ] && b=$([ $b = build ] && echo build-alt || echo build)
    XDG_CACHE_HOME=/tmp/xdg-$b timeout 60 $b/tandem bench /tmp/m/qwen.tdm -t 2 --tests pp512 --reps 3 --ceilings > $OUT/qwen-$b-r$r.json 2> /tmp/e.txt
    grep -E "bench rep" /tmp/e.txt | sed "s|^|$b r$r: |" >> $A
  done
done
st profile
for b in build build-alt build build-alt; do
  XDG_CACHE_HOME=/tmp/xdg-$b TANDEM_PROFILE=warm timeout 60 $b/tandem bench /tmp/m/qwen.tdm -t 2 --tests pp512 --reps 2 --ceilings 2>&1 >/dev/null | grep -E "profile: prefill|bench rep" | sed "s|^|$b: |" >> $A
done
st llama
for b in build build-alt build build-alt; do
  XDG_CACHE_HOME=/tmp/xdg-$b timeout 60 $b/tandem bench /tmp/m/llama.tdm -t 2 --tests pp512 --reps 3 --ceilings 2>&1 > /dev/null | grep "bench rep" | sed "s|^|$b: |" >> $A
done
st done
