#!/bin/bash
# session 8, first device call: session 7's code on the Xeon beside llama.cpp, steady-state
# profiles, the Qwen-shaped GEMV/GEMM kernel rates, the prefill attention kernels (kbench attnp),
# and the fused gate/up A/B. Run: bash .devdeps/run21.sh (carry .devdeps)
R=$(pwd); OUT=${OUT:-/tmp/out}; mkdir -p $OUT; A=$OUT/all21.txt
export LD_LIBRARY_PATH=$R/.devdeps/lib TM_SHARED=$R/.devdeps
T0=$(date +%s); st() { echo "== $1 at $(( $(date +%s) - T0 )) s" | tee -a $A; }
st build
sh .devdeps/build.sh build/tandem build/libtandem.a build/tests/test_kernels build/tests/test_engine > /tmp/build.log 2>&1 || { tail -40 /tmp/build.log; exit 1; }
gcc -O2 -std=c11 -D_GNU_SOURCE -Isrc -Iinclude -I.devdeps/include -I.devdeps/include/cjson tools/kbench.c build/libtandem.a -L.devdeps/lib -lcjson -lpcre2-8 -lutf8proc -lmicrohttpd -lm -pthread -o build/kbench || exit 1
P=.devdeps/peer; mkdir -p /tmp/gg /tmp/tb
for m in llama1b qwen05b; do
 ( PYTHONPATH=$P/gguf-py timeout 200 python3 $P/make_synth_gguf.py /tmp/gg $m > /tmp/gguf_$m.log 2>&1
   LD_LIBRARY_PATH=$P/lib LLB_BACKEND_DIR=$P/lib $P/llbench quantize /tmp/gg/$m-bf16.gguf /tmp/gg/$m-q4_0.gguf q4_0 8 >> /tmp/gguf_$m.log 2>&1 ) &
done
( build/tandem synth --like llama-3.2-1b -o /tmp/tb/llama1b > /dev/null 2>&1; build/tandem convert /tmp/tb/llama1b -o /tmp/tb/llama1b.tdm --threads 4 > /dev/null 2>> $A ) &
( build/tandem synth --like qwen2.5-0.5b -o /tmp/tb/qwen05b > /dev/null 2>> $A; build/tandem convert /tmp/tb/qwen05b -o /tmp/tb/qwen05b.tdm --threads 4 > /dev/null 2>> $A ) &
st tests
( timeout 60 build/tests/test_kernels 2>&1 | tail -1; timeout 90 build/tests/test_engine 2>&1 | tail -1 ) >> $A 2>&1
wait
st kbench
KB="build/kbench -t 2 -c 2"
{ $KB -s 1 mem; $KB -s 1 mem
  for s in "int8 151936 896 1" "q4g64 1152 896 1" "q4g64 896 896 1" "q4g64 9728 896 1" "q4g64 896 4864 1" "q4g64 3072 2048 1" "q4g64 16384 2048 1" "q4g64 2048 8192 1"; do
    $KB -s 0.5 -v avx512 gemv $s | grep -v skipped; done
  for s in "512 14 2 64" "512 32 8 64"; do $KB -s 0.5 attnp $s | grep -v "skipped\|scalar"; done
  for s in "512 1152 896" "512 9728 896" "512 896 4864" "512 896 896"; do $KB -s 0.3 -p 3 -v amx gemm int8 $s | grep -v skipped; done
} >> $A 2>&1
export LLB_BACKEND_DIR=$R/.devdeps/peer/lib LLB_MAX_FOREIGN=1000
for m in qwen05b llama1b; do st "bench $m"
LD_LIBRARY_PATH="$R/.devdeps/lib:$R/.devdeps/peer/lib" timeout 200 build/tandem bench /tmp/tb/$m.tdm -t 2 --tests pp512,tg128 --reps 5 --ceilings --peer llama.cpp --peer-model /tmp/gg/$m-q4_0.gguf --peer-bin $R/.devdeps/peer/llbench --md $OUT/xeon-s8-$m.md > $OUT/xeon-s8-$m.json 2>> $A
cat $OUT/xeon-s8-$m.md >> $A
done
st profile
for m in qwen05b llama1b; do
  TANDEM_PROFILE=1 timeout 60 build/tandem bench /tmp/tb/$m.tdm -t 2 --tests pp512 --reps 10 2>&1 >/dev/null | grep profile | sed "s/^/$m: /" >> $A
  TANDEM_PROFILE=1 timeout 60 build/tandem bench /tmp/tb/$m.tdm -t 2 --tests tg128 --reps 3 2>&1 >/dev/null | grep profile | sed "s/^/$m: /" >> $A
done
st glu
for r in 1 2; do for m in qwen05b llama1b; do for glu in 1 0; do
  v=$(TANDEM_GLU=$glu timeout 40 build/tandem bench /tmp/tb/$m.tdm -t 2 --tests pp512 --reps 3 2>/dev/null | grep -o '"tokens_per_s": [0-9.]*' | grep -o '[0-9.]*$')
  echo "round $r $m glu=$glu pp512 $v t/s" >> $A
done; done; done
st done
