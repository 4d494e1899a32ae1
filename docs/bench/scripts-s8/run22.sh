#!/bin/bash
# session 8, call 2: the transposed AMX attention (S^T = K.Q^T, O^T = V^T.P^T, row-free softmax)
# against session 7's, as kernels (kbench attnp) and in pp512 (interleaved), plus Qwen GEMV rates.
R=$(pwd); OUT=${OUT:-/tmp/out}; mkdir -p $OUT; A=$OUT/all22.txt
export LD_LIBRARY_PATH=$R/.devdeps/lib TM_SHARED=$R/.devdeps
T0=$(date +%s); st() { echo "== $1 at $(( $(date +%s) - T0 )) s" | tee -a $A; }
st build
sh .devdeps/build.sh build/tandem build/libtandem.a build/tests/test_kernels build/tests/test_engine > /tmp/build.log 2>&1 || { tail -40 /tmp/build.log; exit 1; }
CF="-O2 -std=c11 -D_GNU_SOURCE -Isrc -Iinclude -Ibuild/gen -I.devdeps/include -I.devdeps/include/cjson -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512bf16 -mavx512vnni -mamx-tile -mamx-bf16 -mamx-int8 -mfma -mf16c"
LL="-L.devdeps/lib -lcjson -lpcre2-8 -lutf8proc -lmicrohttpd -lm -pthread"
V="old:.devdeps/attn_amx_old.c new:src/engine/cpu/attn_amx.c q64:src/engine/cpu/attn_amx.c:-DAQB=64 p1:src/engine/cpu/attn_amx.c:-DAMX_P_TERMS=1 q64p1:src/engine/cpu/attn_amx.c:-DAQB=64+-DAMX_P_TERMS=1"
for v in $V; do n=${v%%:*}; rest=${v#*:}; src=${rest%%:*}; f=""; [ "$src" != "$rest" ] && f=$(echo ${rest#*:} | tr + " ")
  ( gcc $CF $f -c $src -o /tmp/a_$n.o && gcc $CF tools/kbench.c /tmp/a_$n.o build/libtandem.a $LL -o /tmp/kb_$n && \
    gcc -o /tmp/td_$n build/obj/src/cli/*.o /tmp/a_$n.o build/libtandem.a $LL || echo "build $n failed" >> $A ) &
done; wait
mkdir -p /tmp/tb
( build/tandem synth --like llama-3.2-1b -o /tmp/tb/llama1b > /dev/null 2>&1; build/tandem convert /tmp/tb/llama1b -o /tmp/tb/llama1b.tdm --threads 4 > /dev/null 2>> $A ) &
( build/tandem synth --like qwen2.5-0.5b -o /tmp/tb/qwen05b > /dev/null 2>> $A; build/tandem convert /tmp/tb/qwen05b -o /tmp/tb/qwen05b.tdm --threads 4 > /dev/null 2>> $A ) &
st tests
( timeout 60 build/tests/test_kernels 2>&1 | tail -1; timeout 90 build/tests/test_engine 2>&1 | tail -1 ) >> $A 2>&1
wait
st kernels
for round in 1 2 3; do for s in "512 14 2 64" "512 32 8 64" "512 8 8 128"; do for v in $V; do n=${v%%:*}
  o=$(/tmp/kb_$n -t 2 -c 2 -s 0.4 -v amx attnp $s 2>&1 | grep "v3")
  echo "$round|$s|$n|$(echo "$o" | grep -o '[0-9.]* GFLOP/s' | grep -o '^[0-9.]*')|$(echo "$o" | grep -o 'err [0-9.e+-]* [a-zA-Z]*')" >> $A
done; done; done
python3 - $A <<'PY'
import sys, statistics, collections
d = collections.defaultdict(list)
for l in open(sys.argv[1]):
    p = l.strip().split('|')
    if len(p) == 5 and p[3]: d[(p[1], p[2])].append(float(p[3]))
for k in sorted(d): print("attnp", k, "median %.1f GFLOP/s" % statistics.median(d[k]), d[k])
PY
st models
for round in 1 2 3; do for m in qwen05b llama1b; do for n in old new p1 q64; do
  v=$(timeout 40 /tmp/td_$n bench /tmp/tb/$m.tdm -t 2 --tests pp512 --reps 3 2>/dev/null | grep -o '"tokens_per_s": [0-9.]*' | grep -o '[0-9.]*$')
  echo "pp512 round $round $m $n $v" >> $A
done; done; done
st gemv
KB="build/kbench -t 2 -c 2"
{ build/kbench -t 2 -c 2 -s 1 mem
  for s in "int8 151936 896 1" "int4g64 1152 896 1" "int4g64 896 896 1" "int4g64 9728 896 1" "int4g64 896 4864 1" "int4g64 3072 2048 1" "int4g64 16384 2048 1" "int4g64 2048 8192 1"; do
    /tmp/kb_new -t 2 -c 2 -s 0.5 -v avx512 gemv $s | grep -v skipped; done; } >> $A 2>&1
st done
