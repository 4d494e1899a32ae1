#!/bin/bash
# prepared in session 8 for session 9's first device call: the GEMV's tasks per worker
# (GEMV_TASKS 1 / 2 / 4, kdispatch.c) on the Qwen shape's small matrices and its tg128, interleaved,
# then both shapes beside llama.cpp. Run: bash .devdeps/run27.sh (carry .devdeps)
R=$(pwd); OUT=${OUT:-/tmp/out}; mkdir -p $OUT; A=$OUT/all27.txt
export LD_LIBRARY_PATH=$R/.devdeps/lib TM_SHARED=$R/.devdeps
T0=$(date +%s); st() { echo "== $1 at $(( $(date +%s) - T0 )) s" | tee -a $A; }
st build
sh .devdeps/build.sh build/tandem build/libtandem.a build/kbench build/tests/test_kernels > /tmp/build.log 2>&1 || { tail -40 /tmp/build.log; exit 1; }
CB="-O2 -g -std=c11 -D_GNU_SOURCE -Isrc -Iinclude -Ibuild/gen -I.devdeps/include -I.devdeps/include/cjson"
LL="-L.devdeps/lib -lcjson -lpcre2-8 -lutf8proc -lmicrohttpd -lm -pthread"
for t in 1 2 4; do gcc $CB -DGEMV_TASKS=$t -c src/engine/cpu/kdispatch.c -o /tmp/kd_$t.o
  gcc -o /tmp/td_$t build/obj/src/cli/*.o /tmp/kd_$t.o build/libtandem.a $LL; gcc $CB tools/kbench.c /tmp/kd_$t.o build/libtandem.a $LL -o /tmp/kb_$t; done
P=.devdeps/peer; mkdir -p /tmp/gg /tmp/tb
for m in llama1b qwen05b; do
 ( PYTHONPATH=$P/gguf-py timeout 200 python3 $P/make_synth_gguf.py /tmp/gg $m > /tmp/gguf_$m.log 2>&1
   LD_LIBRARY_PATH=$P/lib LLB_BACKEND_DIR=$P/lib $P/llbench quantize /tmp/gg/$m-bf16.gguf /tmp/gg/$m-q4_0.gguf q4_0 8 >> /tmp/gguf_$m.log 2>&1 ) &
done
( build/tandem synth --like llama-3.2-1b -o /tmp/tb/llama1b > /dev/null 2>&1; build/tandem convert /tmp/tb/llama1b -o /tmp/tb/llama1b.tdm --threads 4 > /dev/null 2>> $A ) &
( build/tandem synth --like qwen2.5-0.5b -o /tmp/tb/qwen05b > /dev/null 2>> $A; build/tandem convert /tmp/tb/qwen05b -o /tmp/tb/qwen05b.tdm --threads 4 > /dev/null 2>> $A ) &
st tests
timeout 60 build/tests/test_kernels 2>&1 | tail -1 >> $A
st gemv
for round in 1 2 3; do for s in "int4g64 1152 896 1" "int4g64 896 896 1" "int4g64 9728 896 1" "int4g64 896 4864 1"; do for t in 1 2 4; do
  echo "$round|$s|T$t|$(/tmp/kb_$t -t 2 -c 2 -s 0.3 -v avx512 gemv $s 2>&1 | grep v2 | grep -o '[0-9.]* GB/s')" >> $A
done; done; done
wait
st tg
for round in 1 2 3; do for t in 1 2 4; do
  v=$(timeout 60 /tmp/td_$t bench /tmp/tb/qwen05b.tdm -t 2 --tests tg128 --reps 2 2>/dev/null | grep -o '"tokens_per_s": [0-9.]*' | grep -o '[0-9.]*$')
  echo "tg128 round $round qwen05b T$t $v" >> $A
done; done
export LLB_BACKEND_DIR=$R/.devdeps/peer/lib LLB_MAX_FOREIGN=1000
for m in qwen05b llama1b; do st "bench $m"
LD_LIBRARY_PATH="$R/.devdeps/lib:$R/.devdeps/peer/lib" timeout 150 build/tandem bench /tmp/tb/$m.tdm -t 2 --tests pp512,tg128 --reps 5 --ceilings --peer llama.cpp --peer-model /tmp/gg/$m-q4_0.gguf --peer-bin $R/.devdeps/peer/llbench --md $OUT/xeon-s9-$m.md > $OUT/xeon-s9-$m.json 2>> $A
cat $OUT/xeon-s9-$m.md >> $A
done
st done
