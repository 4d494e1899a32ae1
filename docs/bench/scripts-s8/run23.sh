#!/bin/bash
# session 8, call 3: where the transposed AMX attention's cycles go (ATTN_PROF), and the GEMM's
# non-temporal f32 stores off (AMX_NT_BYTES huge: gate|up's 20 MB output stays in the caches for
# the activation pass) in pp512, interleaved, with TANDEM_PROFILE.
R=$(pwd); OUT=${OUT:-/tmp/out}; mkdir -p $OUT; A=$OUT/all23.txt
export LD_LIBRARY_PATH=$R/.devdeps/lib TM_SHARED=$R/.devdeps
T0=$(date +%s); st() { echo "== $1 at $(( $(date +%s) - T0 )) s" | tee -a $A; }
st build
sh .devdeps/build.sh build/tandem build/libtandem.a > /tmp/build.log 2>&1 || { tail -40 /tmp/build.log; exit 1; }
CF="-O2 -std=c11 -D_GNU_SOURCE -Isrc -Iinclude -Ibuild/gen -I.devdeps/include -I.devdeps/include/cjson -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512bf16 -mavx512vnni -mamx-tile -mamx-bf16 -mamx-int8 -mfma -mf16c"
LL="-L.devdeps/lib -lcjson -lpcre2-8 -lutf8proc -lmicrohttpd -lm -pthread"
gcc $CF -DATTN_PROF -c src/engine/cpu/attn_amx.c -o /tmp/a_p.o && gcc $CF tools/kbench.c /tmp/a_p.o build/libtandem.a $LL -o /tmp/kb_p
gcc $CF -DATTN_PROF -DAMX_P_TERMS=1 -DAQB=64 -c src/engine/cpu/attn_amx.c -o /tmp/a_p1.o && gcc $CF tools/kbench.c /tmp/a_p1.o build/libtandem.a $LL -o /tmp/kb_p1
gcc $CF -DAMX_NT_BYTES=0xffffffffu -c src/engine/cpu/gemm_amx.c -o /tmp/g_nont.o && gcc -o /tmp/td_nont build/obj/src/cli/*.o /tmp/g_nont.o build/libtandem.a $LL
cp build/tandem /tmp/td_base
mkdir -p /tmp/tb
( build/tandem synth --like llama-3.2-1b -o /tmp/tb/llama1b > /dev/null 2>&1; build/tandem convert /tmp/tb/llama1b -o /tmp/tb/llama1b.tdm --threads 4 > /dev/null 2>> $A ) &
( build/tandem synth --like qwen2.5-0.5b -o /tmp/tb/qwen05b > /dev/null 2>> $A; build/tandem convert /tmp/tb/qwen05b -o /tmp/tb/qwen05b.tdm --threads 4 > /dev/null 2>> $A ) &
st attnprof
for s in "512 14 2 64" "512 32 8 64" "512 8 8 128"; do for k in p p1; do
  /tmp/kb_$k -t 2 -c 2 -s 0.5 -v amx attnp $s 2>&1 | grep -E "v3|attn_prof" | sed "s/^/$k: /" >> $A
done; done
build/kbench 2>/dev/null; /tmp/kb_p -t 2 -c 2 -s 0.5 peak >> $A 2>&1
wait
st models
for round in 1 2 3 4; do for m in qwen05b llama1b; do for n in base nont; do
  v=$(timeout 40 /tmp/td_$n bench /tmp/tb/$m.tdm -t 2 --tests pp512 --reps 3 2>/dev/null | grep -o '"tokens_per_s": [0-9.]*' | grep -o '[0-9.]*$')
  echo "pp512 round $round $m $n $v" >> $A
done; done; done
st profile
for m in qwen05b llama1b; do for n in base nont; do
  TANDEM_PROFILE=1 timeout 60 /tmp/td_$n bench /tmp/tb/$m.tdm -t 2 --tests pp512 --reps 6 2>&1 >/dev/null | grep "profile: prefill" | sed "s/^/$m $n: /" >> $A
done; done
st done
