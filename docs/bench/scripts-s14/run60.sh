#!/bin/bash
# session 14, run 60: the AMX GEMM's epilogue one block later (HEAD, AMX_EPI_LAG=1) against
# right after its block (-DAMX_EPI_LAG=0, the same sources): test_kernels on the Xeon, kbench -p
# shares of the tile peak, Qwen pp512 interleaved; then HEAD beside llama.cpp (Qwen, Llama).
R=$(pwd); OUT=${OUT:-/tmp/out}; mkdir -p $OUT; A=$OUT/all60.txt
export LD_LIBRARY_PATH=$R/.devdeps/lib
T0=$(date +%s); st() { echo "== $1 at $(( $(date +%s) - T0 )) s" | tee -a $A; }
lscpu | grep -iE "model name|MHz" | cut -c1-120 >> $A
st build
P=.devdeps/peer; mkdir -p /tmp/gg
( for m in qwen05b llama1b; do PYTHONPATH=$P/gguf-py timeout 200 python3 $P/make_synth_gguf.py /tmp/gg $m > /tmp/gguf-$m.log 2>&1
  LD_LIBRARY_PATH=$P/lib LLB_BACKEND_DIR=$P/lib $P/llbench quantize /tmp/gg/$m-bf16.gguf /tmp/gg/$m-q4_0.gguf q4_0 6 >> /tmp/gguf-$m.log 2>&1; rm -f /tmp/gg/$m-bf16.gguf; done ) &
GG=$!
sh .devdeps/build.sh build/tandem build/kbench build/tests/test_kernels > /tmp/build.log 2>&1 || { tail -40 /tmp/build.log | tee -a $A; exit 1; }
sh .devdeps/build.sh BUILD=/tmp/lag0 CFLAGS="-O2 -g -DAMX_EPI_LAG=0" /tmp/lag0/tandem /tmp/lag0/kbench > /tmp/build0.log 2>&1 || { tail -20 /tmp/build0.log | tee -a $A; exit 1; }
NEW=$R/build; OLD=/tmp/lag0
st test_kernels
timeout 100 build/tests/test_kernels > /tmp/tk.log 2>&1; echo "test_kernels rc=$? $(tail -1 /tmp/tk.log)" | tee -a $A; grep -E "CHECK failed" /tmp/tk.log | head -5 >> $A
mkdir -p /tmp/tb
for m in qwen2.5-0.5b:q llama-3.2-1b:l; do build/tandem synth --like ${m%%:*} -o /tmp/tb/${m##*:} > /dev/null
  build/tandem convert /tmp/tb/${m##*:} -o /tmp/tb/${m##*:}.tdm --threads 8 > /dev/null 2>> $A; rm -rf /tmp/tb/${m##*:}; done
st kbench
kp() { # round variant shape: the GEMM's median share of the tile peak, paired (-p 3)
  local r=$1 v=$2; shift 2; local bin=$NEW/kbench; [ $v = LAG0 ] && bin=$OLD/kbench
  echo "r$r $v $*: $($bin -t 2 -s 0.2 -p 3 -v amx gemm $* 2>&1 | grep -oE 'median[^0-9]*[0-9.]+%' | grep -oE '[0-9.]+%' | tail -1)" >> $A; }
for round in 1 2; do
  for s in "int8 512 1152 896" "int8 512 9728 896" "int8 512 896 4864" "int8 512 2048 2048" "int8 512 8192 2048" "int8 512 2048 8192" "bf16 512 2048 2048"; do
    for v in LAG0 LAG1; do kp $round $v $s; done; done
  [ $(( $(date +%s) - T0 )) -gt 200 ] && break
done
$NEW/kbench -t 2 -s 0.2 -p 1 -v amx gemm int8 512 9728 896 >> $A 2>&1
st pp512
pq() { echo "r$1 $2 q pp512: $(timeout 60 $3/tandem bench /tmp/tb/q.tdm -t 2 --tests pp512 --reps 2 2>/dev/null | grep -o '"tokens_per_s": [0-9.]*' | grep -o '[0-9.]*$') t/s" >> $A; }
for r in 1 2 3; do pq $r LAG0 $OLD; pq $r LAG1 $NEW; pq $r LAG1 $NEW; pq $r LAG0 $OLD; done
python3 tools/abmed.py $A | tee -a $A
wait $GG; tail -1 /tmp/gguf-qwen05b.log >> $A
st bench
export LLB_BACKEND_DIR=$R/.devdeps/peer/lib LLB_MAX_FOREIGN=1000
BL="$R/.devdeps/lib:$R/.devdeps/peer/lib"
b() { LD_LIBRARY_PATH=$BL timeout 150 $NEW/tandem bench /tmp/tb/$1.tdm -t 2 --tests $3 --reps 3 --ceilings --peer llama.cpp --peer-model /tmp/gg/$2-q4_0.gguf --peer-bin $R/.devdeps/peer/llbench --md $OUT/r60-$1-$4.md > $OUT/r60-$1-$4.json 2>> $A; echo "NEW+peer $1 $4: $(grep -E '^\| (pp512|tg128)' $OUT/r60-$1-$4.md | tr '\n' ' ')" >> $A; }
left() { [ $(( $(date +%s) - T0 )) -lt $1 ]; }
b q qwen05b pp512,tg128 1
left 470 && b l llama1b pp512,tg128 1
st done
