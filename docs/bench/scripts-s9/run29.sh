#!/bin/bash
# session 9, second int6 layout (192-byte superchunks, aligned loads, one shift per half). Head-shaped GEMVs int8 / int6g64 / int4g64,
# tg128 with head int8 vs int6g64 interleaved, then both shapes with the int6 head
# beside llama.cpp. Run: bash .devdeps/run29.sh (carry .devdeps)
R=$(pwd); OUT=${OUT:-/tmp/out}; mkdir -p $OUT; A=$OUT/all29.txt
export LD_LIBRARY_PATH=$R/.devdeps/lib TM_SHARED=$R/.devdeps
T0=$(date +%s); st() { echo "== $1 at $(( $(date +%s) - T0 )) s" | tee -a $A; }
st build
sh .devdeps/build.sh build/tandem build/libtandem.a build/kbench build/tests/test_kernels build/tests/test_quant > /tmp/build.log 2>&1 || { tail -40 /tmp/build.log; exit 1; }
P=.devdeps/peer; mkdir -p /tmp/gg /tmp/tb
for m in llama1b qwen05b; do
 ( PYTHONPATH=$P/gguf-py timeout 200 python3 $P/make_synth_gguf.py /tmp/gg $m > /tmp/gguf_$m.log 2>&1
   LD_LIBRARY_PATH=$P/lib LLB_BACKEND_DIR=$P/lib $P/llbench quantize /tmp/gg/$m-bf16.gguf /tmp/gg/$m-q4_0.gguf q4_0 8 >> /tmp/gguf_$m.log 2>&1 ) &
done
for m in "llama1b llama-3.2-1b" "qwen05b qwen2.5-0.5b"; do set -- $m
( build/tandem synth --like $2 -o /tmp/tb/$1 > /dev/null 2>> $A
  build/tandem convert /tmp/tb/$1 -o /tmp/tb/$1-h8.tdm --threads 4 > /dev/null 2>> $A
  build/tandem convert /tmp/tb/$1 -o /tmp/tb/$1-h6.tdm --head-enc int6g64 --threads 4 > /dev/null 2>> $A ) &
done
st tests
timeout 60 build/tests/test_kernels 2>&1 | tail -1 >> $A
timeout 60 build/tests/test_quant 2>&1 | tail -1 >> $A
st gemv
for round in 1 2 3; do for s in "151936 896" "128256 2048"; do for d in int8 int6g64 int4g64; do
  echo "$round|$s|$d|$(build/kbench -t 2 -s 0.3 -v avx512 gemv $d $s 1 2>&1 | grep v2 | grep -o '[0-9.]* GB/s.*us per call')" >> $A
done; done; done
wait
ls -la /tmp/tb/*.tdm /tmp/gg/*q4_0* >> $A 2>&1
st tg
for round in 1 2 3 4; do for m in qwen05b llama1b; do for h in h8 h6; do
  v=$(timeout 90 build/tandem bench /tmp/tb/$m-$h.tdm -t 2 --tests tg128 --reps 2 2>/dev/null | grep -o '"tokens_per_s": [0-9.]*' | grep -o '[0-9.]*$')
  echo "tg128 round $round $m $h $v" >> $A
done; done; done
export LLB_BACKEND_DIR=$R/.devdeps/peer/lib LLB_MAX_FOREIGN=1000
for m in qwen05b; do for h in h6 h8; do st "bench $m $h"
LD_LIBRARY_PATH="$R/.devdeps/lib:$R/.devdeps/peer/lib" timeout 150 build/tandem bench /tmp/tb/$m-$h.tdm -t 2 --tests tg128,pp512 --reps 5 --ceilings --peer llama.cpp --peer-model /tmp/gg/$m-q4_0.gguf --peer-bin $R/.devdeps/peer/llbench --md $OUT/xeon-s9b-$m-$h.md > $OUT/xeon-s9b-$m-$h.json 2>> $A
cat $OUT/xeon-s9b-$m-$h.md >> $A
done; done
st done
