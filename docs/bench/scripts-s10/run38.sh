#!/bin/bash
# session 10: Qwen pp512 with the fused gate/up GEMM (TANDEM_GLU=1) and a reciprocal-estimate silu,
# interleaved against the default. Run: bash .devprof/run38.sh
R=$(pwd); OUT=${OUT:-/tmp/out}; mkdir -p $OUT; A=$OUT/all38.txt
export LD_LIBRARY_PATH=$R/.devdeps/lib
T0=$(date +%s); st() { echo "== $1 at $(( $(date +%s) - T0 )) s" | tee -a $A; }
st build
sh .devdeps/build.sh build/tandem build/libtandem.a > /tmp/build.log 2>&1 || { tail -40 /tmp/build.log; exit 1; }
CB="-O2 -g -std=c11 -D_GNU_SOURCE -Isrc -Iinclude -Ibuild/gen -I.devdeps/include -I.devdeps/include/cjson -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512vnni -mavx512bf16 -mfma -mf16c -mamx-tile -mamx-int8 -mamx-bf16"
LL="-L.devdeps/lib -lcjson -lpcre2-8 -lutf8proc -lmicrohttpd -lm -pthread"
gcc $CB -DVSILU_RCP -c src/engine/cpu/gemm_amx.c -o /tmp/g_rcp.o && gcc $CB -DVSILU_RCP -c src/engine/cpu/ops_avx512.c -o /tmp/o_rcp.o && \
gcc -o /tmp/td_rcp build/obj/src/cli/*.o /tmp/g_rcp.o /tmp/o_rcp.o build/libtandem.a $LL 2>> $A
cp build/tandem /tmp/td_def
mkdir -p /tmp/tb; [ -f /tmp/tb/q.tdm ] || { build/tandem synth --like qwen2.5-0.5b -o /tmp/tb/q > /dev/null; build/tandem convert /tmp/tb/q -o /tmp/tb/q.tdm --threads 8 > /dev/null; }
st pp512
pp() { timeout 60 "$@" bench /tmp/tb/q.tdm -t 2 --tests pp512 --reps 3 2>/dev/null | grep -o '"tokens_per_s": [0-9.]*' | grep -o '[0-9.]*$'; }
for round in 1 2 3 4 5; do
  echo "round $round | def $(pp /tmp/td_def) | glu $(TANDEM_GLU=1 pp /tmp/td_def) | rcp $(pp /tmp/td_rcp) | glu+rcp $(TANDEM_GLU=1 pp /tmp/td_rcp)" >> $A
done
st done
