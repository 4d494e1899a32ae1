#!/bin/bash
# session 9: pp512 with the AMX epilogue deferral never (old), for the fused gate/up GEMM
# only (AMX_DEFER=1) and always (AMX_DEFER=2), interleaved. Run: bash .devdeps/run31.sh
R=$(pwd); OUT=${OUT:-/tmp/out}; mkdir -p $OUT; A=$OUT/all31.txt
export LD_LIBRARY_PATH=$R/.devdeps/lib
T0=$(date +%s); st() { echo "== $1 at $(( $(date +%s) - T0 )) s" | tee -a $A; }
st build
sh .devdeps/build.sh build/tandem build/libtandem.a > /tmp/build.log 2>&1 || { tail -40 /tmp/build.log; exit 1; }
CF="-O2 -g -std=c11 -D_GNU_SOURCE -Isrc -Iinclude -Ibuild/gen -I.devdeps/include -I.devdeps/include/cjson -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512bf16 -mavx512vnni -mamx-tile -mamx-bf16 -mamx-int8 -mfma -mf16c"
LL="-L.devdeps/lib -lcjson -lpcre2-8 -lutf8proc -lmicrohttpd -lm -pthread"
for d in 0 1 2; do gcc $CF -DAMX_DEFER=$d -c src/engine/cpu/gemm_amx.c -o /tmp/g_$d.o 2>> $A
  gcc -o /tmp/td_$d build/obj/src/cli/*.o /tmp/g_$d.o build/libtandem.a $LL 2>> $A; done
mkdir -p /tmp/tb
for m in "llama1b llama-3.2-1b" "qwen05b qwen2.5-0.5b"; do set -- $m
( build/tandem synth --like $2 -o /tmp/tb/$1 > /dev/null 2>> $A
  build/tandem convert /tmp/tb/$1 -o /tmp/tb/$1.tdm --threads 4 > /dev/null 2>> $A ) &
done
wait
st pp
for round in 1 2 3 4; do for m in qwen05b llama1b; do for d in 0 1 2; do
  x=$(timeout 40 /tmp/td_$d bench /tmp/tb/$m.tdm -t 2 --tests pp512 --reps 2 2>/dev/null | grep -o '"tokens_per_s": [0-9.]*' | grep -o '[0-9.]*$')
  echo "pp512 round $round $m defer$d $x" >> $A
done; done; done
st done
