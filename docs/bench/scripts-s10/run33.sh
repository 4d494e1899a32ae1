#!/bin/bash
# session 10: int4/int6 scales in f16 (package v2). Setup (build, tests, GGUFs, packages), then
# the benches named in $BENCH ("qwen05b:def qwen05b:h6 ..."), each beside llama.cpp.
# Run: BENCH="..." bash .devdeps/run33.sh (carry .devdeps). Setup is skipped when /tmp/tb is ready.
R=$(pwd); OUT=${OUT:-/tmp/out}; mkdir -p $OUT; A=$OUT/all33.txt
export LD_LIBRARY_PATH=$R/.devdeps/lib TM_SHARED=$R/.devdeps
T0=$(date +%s); st() { echo "== $1 at $(( $(date +%s) - T0 )) s" | tee -a $A; }
st build
sh .devdeps/build.sh build/tandem build/libtandem.a build/kbench build/tests/test_kernels build/tests/test_quant > /tmp/build.log 2>&1 || { tail -40 /tmp/build.log; exit 1; }
P=.devdeps/peer; mkdir -p /tmp/gg /tmp/tb
if [ ! -f /tmp/tb/ready ]; then
for m in llama1b qwen05b; do
 ( PYTHONPATH=$P/gguf-py timeout 200 python3 $P/make_synth_gguf.py /tmp/gg $m > /tmp/gguf_$m.log 2>&1
   LD_LIBRARY_PATH=$P/lib LLB_BACKEND_DIR=$P/lib $P/llbench quantize /tmp/gg/$m-bf16.gguf /tmp/gg/$m-q4_0.gguf q4_0 8 >> /tmp/gguf_$m.log 2>&1 ) &
done
for m in "llama1b llama-3.2-1b" "qwen05b qwen2.5-0.5b"; do set -- $m
( build/tandem synth --like $2 -o /tmp/tb/$1 > /dev/null 2>> $A
  build/tandem convert /tmp/tb/$1 -o /tmp/tb/$1-def.tdm --threads 4 > /dev/null 2>> $A
  build/tandem convert /tmp/tb/$1 -o /tmp/tb/$1-h6.tdm --head-enc int6g64 --threads 4 > /dev/null 2>> $A ) &
done
st tests
timeout 90 build/tests/test_kernels 2>&1 | tail -1 >> $A
timeout 60 build/tests/test_quant 2>&1 | tail -1 >> $A
wait
ls -la /tmp/tb/*.tdm /tmp/gg/*q4_0* >> $A 2>&1
touch /tmp/tb/ready
fi
st benches
export LLB_BACKEND_DIR=$R/.devdeps/peer/lib LLB_MAX_FOREIGN=1000
i=0; for b in $BENCH; do i=$((i+1)); m=${b%%:*}; h=${b##*:}; st "bench $i $m $h"
LD_LIBRARY_PATH="$R/.devdeps/lib:$R/.devdeps/peer/lib" timeout ${BT:-170} build/tandem bench /tmp/tb/$m-$h.tdm -t 2 --tests ${TESTS:-pp512,tg128} --reps ${REPS:-5} --ceilings --peer llama.cpp --peer-model /tmp/gg/$m-q4_0.gguf --peer-bin $R/.devdeps/peer/llbench --md $OUT/xeon-s10-${TAG}$i-$m-$h.md > $OUT/xeon-s10-${TAG}$i-$m-$h.json 2>> $A
cat $OUT/xeon-s10-${TAG}$i-$m-$h.md >> $A
done
for g in $GEMV; do st "gemv $g"; for round in 1 2 3; do for d in int8 int6g64 int4g64; do
  echo "$round|$g|$d|$(build/kbench -t 2 -s 0.3 -v avx512 gemv $d ${g/x/ } 1 2>&1 | grep v2 | grep -o '[0-9.]* GB/s.*us per call')" >> $A
done; done; done
for g in $AMX; do st "amx $g"; echo "$g $(build/kbench -t 2 -s 0.3 -v amx -p 3 gemm ${g//x/ } 2>&1 | grep -i 'peak\|v3' | tr '\n' ' ')" >> $A; done
st done
