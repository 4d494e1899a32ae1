#!/bin/bash
# session 8, call 4: session 8's engine (transposed AMX attention, activation over the gate rows,
# int4 GEMV with the +8 correction in the accumulator and each task's first 8 KB prefetched)
# against session 7's, interleaved: pp512 and tg128 on both shapes, and the GEMV kernels.
R=$(pwd); OUT=${OUT:-/tmp/out}; mkdir -p $OUT; A=$OUT/all24.txt
export LD_LIBRARY_PATH=$R/.devdeps/lib TM_SHARED=$R/.devdeps
T0=$(date +%s); st() { echo "== $1 at $(( $(date +%s) - T0 )) s" | tee -a $A; }
st build
sh .devdeps/build.sh build/tandem build/libtandem.a > /tmp/build.log 2>&1 || { tail -40 /tmp/build.log; exit 1; }
CF="-O2 -std=c11 -D_GNU_SOURCE -Isrc -Iinclude -Ibuild/gen -I.devdeps/include -I.devdeps/include/cjson -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512bf16 -mavx512vnni -mamx-tile -mamx-bf16 -mamx-int8 -mfma -mf16c"
LL="-L.devdeps/lib -lcjson -lpcre2-8 -lutf8proc -lmicrohttpd -lm -pthread"
gcc $CF -c .devdeps/attn_amx_old.c -o /tmp/o_attn.o; gcc $CF -c .devdeps/gemv_avx512_s7.c -o /tmp/o_gemv.o
gcc -O2 -g -std=c11 -D_GNU_SOURCE -Isrc -Iinclude -Ibuild/gen -I.devdeps/include -I.devdeps/include/cjson -c .devdeps/cpu_engine_s7.c -o /tmp/o_eng.o
gcc $CF -DQ4_NO_PF_START -c src/engine/cpu/gemv_avx512.c -o /tmp/n_gemv_nopf.o
gcc -o /tmp/td_old build/obj/src/cli/*.o /tmp/o_attn.o /tmp/o_gemv.o /tmp/o_eng.o build/libtandem.a $LL || echo "td_old build failed" >> $A
cp build/tandem /tmp/td_new
gcc $CF tools/kbench.c build/libtandem.a $LL -o /tmp/kb_new; gcc $CF tools/kbench.c /tmp/o_gemv.o build/libtandem.a $LL -o /tmp/kb_old
gcc $CF tools/kbench.c /tmp/n_gemv_nopf.o build/libtandem.a $LL -o /tmp/kb_nopf
mkdir -p /tmp/tb
( build/tandem synth --like llama-3.2-1b -o /tmp/tb/llama1b > /dev/null 2>&1; build/tandem convert /tmp/tb/llama1b -o /tmp/tb/llama1b.tdm --threads 4 > /dev/null 2>> $A ) &
( build/tandem synth --like qwen2.5-0.5b -o /tmp/tb/qwen05b > /dev/null 2>> $A; build/tandem convert /tmp/tb/qwen05b -o /tmp/tb/qwen05b.tdm --threads 4 > /dev/null 2>> $A ) &
st gemv
for round in 1 2 3; do for s in "int4g64 1152 896 1" "int4g64 896 896 1" "int4g64 9728 896 1" "int4g64 896 4864 1" "int8 151936 896 1" "int4g64 3072 2048 1"; do for v in old nopf new; do
  o=$(/tmp/kb_$v -t 2 -c 2 -s 0.3 -v avx512 gemv $s 2>&1 | grep v2)
  echo "$round|$s|$v|$(echo "$o" | grep -o '[0-9.]* GB/s' | grep -o '^[0-9.]*')|$(echo "$o" | grep -o 'INVALID')" >> $A
done; done; done
python3 - $A <<'PY'
import sys, statistics, collections
d = collections.defaultdict(list)
for l in open(sys.argv[1]):
    p = l.strip().split('|')
    if len(p) == 5 and p[3]: d[(p[1], p[2])].append(float(p[3]))
for k in sorted(d): print("gemv", k, "median %.2f GB/s" % statistics.median(d[k]), d[k])
PY
wait
st models
for round in 1 2 3; do for m in qwen05b llama1b; do for n in old new; do
  v=$(timeout 60 /tmp/td_$n bench /tmp/tb/$m.tdm -t 2 --tests pp512,tg128 --reps 2 2>/dev/null | grep -o '"tokens_per_s": [0-9.]*' | grep -o '[0-9.]*$' | tr '\n' ' ')
  echo "pp512,tg128 round $round $m $n $v" >> $A
done; done; done
st profile
for m in qwen05b llama1b; do
  TANDEM_PROFILE=1 timeout 60 /tmp/td_new bench /tmp/tb/$m.tdm -t 2 --tests pp512 --reps 6 2>&1 >/dev/null | grep "profile: prefill" | sed "s/^/$m new: /" >> $A
done
st done
