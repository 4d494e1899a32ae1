#!/bin/bash
# session 9: the AMX GEMM with each block's epilogue deferred past the next block's tile
# products (gemm_amx.c), against the code before (HEAD~ gemm_amx.c), interleaved, paired
# with the tile peak (kbench -p); then pp512 of both shapes beside llama.cpp.
# Run: bash .devdeps/run30.sh (carry .devdeps; .devdeps/gemm_amx_s8.c = the code before)
R=$(pwd); OUT=${OUT:-/tmp/out}; mkdir -p $OUT; A=$OUT/all30.txt
export LD_LIBRARY_PATH=$R/.devdeps/lib TM_SHARED=$R/.devdeps
T0=$(date +%s); st() { echo "== $1 at $(( $(date +%s) - T0 )) s" | tee -a $A; }
st build
sh .devdeps/build.sh build/tandem build/libtandem.a build/kbench build/tests/test_kernels > /tmp/build.log 2>&1 || { tail -40 /tmp/build.log; exit 1; }
CF="-O2 -g -std=c11 -D_GNU_SOURCE -Isrc -Iinclude -Ibuild/gen -I.devdeps/include -I.devdeps/include/cjson -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512bf16 -mavx512vnni -mamx-tile -mamx-bf16 -mamx-int8 -mfma -mf16c"
LL="-L.devdeps/lib -lcjson -lpcre2-8 -lutf8proc -lmicrohttpd -lm -pthread"
gcc $CF -c .devdeps/gemm_amx_s8.c -o /tmp/g_old.o 2>> $A && gcc $CF -c src/engine/cpu/gemm_amx.c -o /tmp/g_new.o 2>> $A
for v in old new; do gcc $CF tools/kbench.c /tmp/g_$v.o build/libtandem.a $LL -o /tmp/kb_$v 2>> $A
  gcc -o /tmp/td_$v build/obj/src/cli/*.o /tmp/g_$v.o build/libtandem.a $LL 2>> $A; done
P=.devdeps/peer; mkdir -p /tmp/gg /tmp/tb
for m in llama1b qwen05b; do
 ( PYTHONPATH=$P/gguf-py timeout 200 python3 $P/make_synth_gguf.py /tmp/gg $m > /tmp/gguf_$m.log 2>&1
   LD_LIBRARY_PATH=$P/lib LLB_BACKEND_DIR=$P/lib $P/llbench quantize /tmp/gg/$m-bf16.gguf /tmp/gg/$m-q4_0.gguf q4_0 8 >> /tmp/gguf_$m.log 2>&1 ) &
done
for m in "llama1b llama-3.2-1b" "qwen05b qwen2.5-0.5b"; do set -- $m
( build/tandem synth --like $2 -o /tmp/tb/$1 > /dev/null 2>> $A
  build/tandem convert /tmp/tb/$1 -o /tmp/tb/$1.tdm --threads 4 > /dev/null 2>> $A ) &
done
st tests
timeout 60 build/tests/test_kernels 2>&1 | tail -1 >> $A
st gemm
for round in 1 2 3; do for s in "int8 512 1152 896" "int8 512 896 4864" "int8 512 2048 2048" "int8 512 8192 2048" "bf16 512 2048 2048"; do for v in old new; do
  echo "$round|$s|$v|$(/tmp/kb_$v -t 2 -s 0.2 -p 3 -v amx gemm $s 2>&1 | grep -o 'median [0-9.]* GFLOP/s, median [0-9.]*%')" >> $A
done; done; done
wait
st pp
for round in 1 2 3; do for m in qwen05b llama1b; do for v in old new; do
  x=$(timeout 60 /tmp/td_$v bench /tmp/tb/$m.tdm -t 2 --tests pp512 --reps 2 2>/dev/null | grep -o '"tokens_per_s": [0-9.]*' | grep -o '[0-9.]*$')
  echo "pp512 round $round $m $v $x" >> $A
done; done; done
st done
