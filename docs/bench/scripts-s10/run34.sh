#!/bin/bash
# session 10: decode attention (prefetch two pages ahead, vdpbf16ps scores) against the code before it
# (.devdeps/attn_s9/), kbench attn and Llama e4096+64 TPOT interleaved; then more Qwen rounds beside llama.cpp.
# Run: bash .devdeps/run34.sh (carry .devdeps)
R=$(pwd); OUT=${OUT:-/tmp/out}; mkdir -p $OUT; A=$OUT/all34.txt
export LD_LIBRARY_PATH=$R/.devdeps/lib TM_SHARED=$R/.devdeps
T0=$(date +%s); st() { echo "== $1 at $(( $(date +%s) - T0 )) s" | tee -a $A; }
st build
sh .devdeps/build.sh build/tandem build/libtandem.a build/kbench build/tests/test_kernels > /tmp/build.log 2>&1 || { tail -40 /tmp/build.log; exit 1; }
CB="-O2 -g -std=c11 -D_GNU_SOURCE -Isrc -Iinclude -Ibuild/gen -I.devdeps/include -I.devdeps/include/cjson -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512vnni -mavx512bf16 -mfma -mf16c"
LL="-L.devdeps/lib -lcjson -lpcre2-8 -lutf8proc -lmicrohttpd -lm -pthread"
gcc $CB -c .devdeps/attn_s9/attn_avx512.c -o /tmp/attn_old.o 2>> $A
gcc -O2 -std=c11 -D_GNU_SOURCE -Isrc -Iinclude -Ibuild/gen -o /tmp/kb_old tools/kbench.c /tmp/attn_old.o build/libtandem.a $LL 2>> $A
gcc -o /tmp/td_old build/obj/src/cli/*.o /tmp/attn_old.o build/libtandem.a $LL 2>> $A; cp build/tandem /tmp/td_new; cp build/kbench /tmp/kb_new
timeout 90 build/tests/test_kernels 2>&1 | tail -1 >> $A
P=.devdeps/peer; mkdir -p /tmp/gg /tmp/tb
if [ ! -f /tmp/tb/ready ]; then
for m in qwen05b; do
 ( PYTHONPATH=$P/gguf-py timeout 200 python3 $P/make_synth_gguf.py /tmp/gg $m > /tmp/gguf_$m.log 2>&1
   LD_LIBRARY_PATH=$P/lib LLB_BACKEND_DIR=$P/lib $P/llbench quantize /tmp/gg/$m-bf16.gguf /tmp/gg/$m-q4_0.gguf q4_0 8 >> /tmp/gguf_$m.log 2>&1 ) &
done
for m in "llama1b llama-3.2-1b" "qwen05b qwen2.5-0.5b"; do set -- $m
( build/tandem synth --like $2 -o /tmp/tb/$1 > /dev/null 2>> $A
  build/tandem convert /tmp/tb/$1 -o /tmp/tb/$1-def.tdm --threads 4 > /dev/null 2>> $A
  [ $1 = qwen05b ] && build/tandem convert /tmp/tb/$1 -o /tmp/tb/$1-h6.tdm --head-enc int6g64 --threads 4 > /dev/null 2>> $A ) &
done
fi
st attn
for round in 1 2 3; do for c in "bf16 8192 1 32 8 64" "bf16 8192 1 14 2 64" "int8 8192 1 32 8 64"; do for v in old new; do
  echo "attn $round | $c | $v | $(/tmp/kb_$v -t 2 -s 0.5 -v avx512 attn $c 2>&1 | grep v2 | grep -o 'err.*')" >> $A
done; done; done
wait; touch /tmp/tb/ready
st e4096
for round in 1 2; do for v in old new; do
  echo "e4096+64 $round $v $(timeout 60 /tmp/td_$v bench /tmp/tb/llama1b-def.tdm -t 2 --tests e4096+64 --reps 1 2>/dev/null | grep -o '"tpot_p50_ms": [0-9.]*')" >> $A
done; done
st benches
export LLB_BACKEND_DIR=$R/.devdeps/peer/lib LLB_MAX_FOREIGN=1000
i=0; for b in qwen05b:def qwen05b:h6 qwen05b:def qwen05b:h6; do i=$((i+1)); m=${b%%:*}; h=${b##*:}; st "bench $i $m $h"
LD_LIBRARY_PATH="$R/.devdeps/lib:$R/.devdeps/peer/lib" timeout 120 build/tandem bench /tmp/tb/$m-$h.tdm -t 2 --tests pp512,tg128 --reps 3 --ceilings --peer llama.cpp --peer-model /tmp/gg/$m-q4_0.gguf --peer-bin $R/.devdeps/peer/llbench --md $OUT/q$i.md > $OUT/q$i.json 2>> $A
cat $OUT/q$i.md >> $A
done
st done
cd $OUT && tar czf r4.tgz q*.md q*.json && rm -f q*.md q*.json
