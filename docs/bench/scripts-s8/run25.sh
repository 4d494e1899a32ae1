#!/bin/bash
# session 8, final call: the AMX suites and conformance on real tiles, the prefill attention kernel
# against session 7's (kbench attnp), then both shapes beside llama.cpp (reps 5, ceilings).
R=$(pwd); OUT=${OUT:-/tmp/out}; mkdir -p $OUT; A=$OUT/all25.txt
export LD_LIBRARY_PATH=$R/.devdeps/lib TM_SHARED=$R/.devdeps
T0=$(date +%s); st() { echo "== $1 at $(( $(date +%s) - T0 )) s" | tee -a $A; }
st build
sh .devdeps/build.sh build/tandem build/libtandem.a build/tests/test_kernels build/tests/test_engine build/tests/test_engine_conf > /tmp/build.log 2>&1 || { tail -40 /tmp/build.log; exit 1; }
CF="-O2 -std=c11 -D_GNU_SOURCE -Isrc -Iinclude -Ibuild/gen -I.devdeps/include -I.devdeps/include/cjson -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512bf16 -mavx512vnni -mamx-tile -mamx-bf16 -mamx-int8 -mfma -mf16c"
LL="-L.devdeps/lib -lcjson -lpcre2-8 -lutf8proc -lmicrohttpd -lm -pthread"
gcc $CF tools/kbench.c build/libtandem.a $LL -o /tmp/kb_new; gcc $CF -c .devdeps/attn_amx_old.c -o /tmp/o_attn.o && gcc $CF tools/kbench.c /tmp/o_attn.o build/libtandem.a $LL -o /tmp/kb_old
P=.devdeps/peer; mkdir -p /tmp/gg /tmp/tb
for m in llama1b qwen05b; do
 ( PYTHONPATH=$P/gguf-py timeout 200 python3 $P/make_synth_gguf.py /tmp/gg $m > /tmp/gguf_$m.log 2>&1
   LD_LIBRARY_PATH=$P/lib LLB_BACKEND_DIR=$P/lib $P/llbench quantize /tmp/gg/$m-bf16.gguf /tmp/gg/$m-q4_0.gguf q4_0 8 >> /tmp/gguf_$m.log 2>&1 ) &
done
( build/tandem synth --like llama-3.2-1b -o /tmp/tb/llama1b > /dev/null 2>&1; build/tandem convert /tmp/tb/llama1b -o /tmp/tb/llama1b.tdm --threads 4 > /dev/null 2>> $A ) &
( build/tandem synth --like qwen2.5-0.5b -o /tmp/tb/qwen05b > /dev/null 2>> $A; build/tandem convert /tmp/tb/qwen05b -o /tmp/tb/qwen05b.tdm --threads 4 > /dev/null 2>> $A ) &
st tests
( timeout 60 build/tests/test_kernels 2>&1 | tail -1; timeout 90 build/tests/test_engine 2>&1 | tail -1
  timeout 120 build/tests/test_engine_conf > /tmp/conf.log 2>&1; grep -E "cpu-amx|test_engine_conf" /tmp/conf.log ) >> $A 2>&1
st attnp
for round in 1 2 3; do for s in "512 14 2 64" "512 32 8 64"; do for v in old new; do
  o=$(/tmp/kb_$v -t 2 -c 2 -s 0.4 -v amx attnp $s 2>&1 | grep "v3")
  echo "attnp $round|$s|$v|$(echo "$o" | grep -o '[0-9.]* GFLOP/s' | grep -o '^[0-9.]*')|$(echo "$o" | grep -o 'err [0-9.e+-]* [a-zA-Z]*')" >> $A
done; done; done
wait
export LLB_BACKEND_DIR=$R/.devdeps/peer/lib LLB_MAX_FOREIGN=1000
for m in qwen05b llama1b; do st "bench $m"
LD_LIBRARY_PATH="$R/.devdeps/lib:$R/.devdeps/peer/lib" timeout 200 build/tandem bench /tmp/tb/$m.tdm -t 2 --tests pp512,tg128 --reps 5 --ceilings --peer llama.cpp --peer-model /tmp/gg/$m-q4_0.gguf --peer-bin $R/.devdeps/peer/llbench --md $OUT/xeon-s8-final-$m.md > $OUT/xeon-s8-final-$m.json 2>> $A
cat $OUT/xeon-s8-final-$m.md >> $A
done
st profile
for m in qwen05b llama1b; do
  TANDEM_PROFILE=1 timeout 60 build/tandem bench /tmp/tb/$m.tdm -t 2 --tests pp512 --reps 6 2>&1 >/dev/null | grep "profile: prefill" | sed "s/^/$m: /" >> $A
done
st done
