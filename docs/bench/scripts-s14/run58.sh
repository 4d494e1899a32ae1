#!/bin/bash
# session 14, run 58: the int4 GEMV's per-window scales (HEAD) and its GFNI build, against the
# session-13 kernel (.devdeps/s14base = f87df70): test_kernels on the Xeon, kbench A/B/C
# (OLD, NEW -g 0, NEW), then tg128 beside llama.cpp Q4_0 interleaved with OLD.
R=$(pwd); OUT=${OUT:-/tmp/out}; mkdir -p $OUT; A=$OUT/all58.txt
export LD_LIBRARY_PATH=$R/.devdeps/lib
T0=$(date +%s); st() { echo "== $1 at $(( $(date +%s) - T0 )) s" | tee -a $A; }
lscpu | grep -iE "model name|L2|L3|Thread|MHz|gfni" | cut -c1-200 >> $A
st build
P=.devdeps/peer; mkdir -p /tmp/gg
( for m in qwen05b llama1b; do PYTHONPATH=$P/gguf-py timeout 200 python3 $P/make_synth_gguf.py /tmp/gg $m > /tmp/gguf-$m.log 2>&1
  LD_LIBRARY_PATH=$P/lib LLB_BACKEND_DIR=$P/lib $P/llbench quantize /tmp/gg/$m-bf16.gguf /tmp/gg/$m-q4_0.gguf q4_0 6 >> /tmp/gguf-$m.log 2>&1; rm -f /tmp/gg/$m-bf16.gguf; done ) &
GG=$!
sh .devdeps/build.sh build/tandem build/kbench build/tests/test_kernels > /tmp/build.log 2>&1 || { tail -40 /tmp/build.log | tee -a $A; exit 1; }
D=$R/.devdeps
( cd .devdeps/s14base && make -j16 CC="gcc -I$D/include -I$D/include/cjson -L$D/lib -Wl,-rpath,$D/lib" build/tandem build/kbench > /tmp/build0.log 2>&1 ) || { tail -20 /tmp/build0.log | tee -a $A; exit 1; }
NEW=$R/build; OLD=$R/.devdeps/s14base/build
build/tandem devices 2>&1 | head -5 >> $A
st test_kernels
timeout 120 build/tests/test_kernels > /tmp/tk.log 2>&1; echo "test_kernels rc=$? $(tail -1 /tmp/tk.log)" | tee -a $A; grep -E "FAIL|CHECK failed" /tmp/tk.log | head -5 >> $A
mkdir -p /tmp/tb
for m in qwen2.5-0.5b:q llama-3.2-1b:l; do build/tandem synth --like ${m%%:*} -o /tmp/tb/${m##*:} > /dev/null
  build/tandem convert /tmp/tb/${m##*:} -o /tmp/tb/${m##*:}.tdm --threads 8 > /dev/null 2>> $A
  [ ${m##*:} = q ] && build/tandem convert /tmp/tb/q -o /tmp/tb/q-h6.tdm --head-enc int6g64 --threads 8 > /dev/null 2>> $A
  rm -rf /tmp/tb/${m##*:}; done
st kbench
kb() { # round variant threads mib shape...
  local r=$1 v=$2 t=$3 m=$4; shift 4; local bin=$NEW/kbench g=""
  [ $v = OLD ] && bin=$OLD/kbench; [ $v = G0 ] && g="-g 0"
  echo "r$r $v t$t m$m $*: $($bin -t $t -s 0.3 -m $m $g -v avx512 gemv $* 2>&1 | head -1 | grep -o '[0-9.]* GB/s')" >> $A; }
for round in 1 2; do
  echo "r$round memread $($NEW/kbench -t 2 -s 0.5 mem 2>&1 | tail -1)" >> $A
  for s in "int4g64 4864 896 1" "int4g64 896 4864 1" "int6g64 4864 896 1"; do for v in OLD G0 NEW; do kb $round $v 1 1 $s; done; done
  for s in "int4g64 1152 896 1" "int4g64 896 896 1" "int4g64 9728 896 1" "int4g64 896 4864 1" "int6g64 151936 896 1" "int4g64 16384 2048 1" "int4g64 2048 8192 1" "int4g64 9728 896 8"; do
    for v in OLD G0 NEW; do kb $round $v 2 512 $s; done; done
done
python3 tools/abmed.py $A | tee -a $A
wait $GG; tail -1 /tmp/gguf-qwen05b.log >> $A; ls -la /tmp/gg /tmp/tb >> $A
st bench
export LLB_BACKEND_DIR=$R/.devdeps/peer/lib LLB_MAX_FOREIGN=1000
BL="$R/.devdeps/lib:$R/.devdeps/peer/lib"
b() { LD_LIBRARY_PATH=$BL timeout 150 $NEW/tandem bench /tmp/tb/$1.tdm -t 2 --tests $3 --reps 3 --ceilings --peer llama.cpp --peer-model /tmp/gg/$2-q4_0.gguf --peer-bin $R/.devdeps/peer/llbench --md $OUT/r58-$1-$4.md > $OUT/r58-$1-$4.json 2>> $A; echo "NEW+peer $1 $4: $(grep -E '^\| (pp512|tg128)' $OUT/r58-$1-$4.md | tr '\n' ' ')" >> $A; }
o() { echo "OLD $1: $(timeout 100 $OLD/tandem bench /tmp/tb/$1.tdm -t 2 --tests tg128 --reps 3 2>/dev/null | grep -o '"tokens_per_s": [0-9.]*')" >> $A; }
left() { [ $(( $(date +%s) - T0 )) -lt $1 ]; }
b q qwen05b pp512,tg128 1; o q
left 420 && { b l llama1b pp512,tg128 1; o l; }
left 470 && { b q qwen05b tg128 2; o q; }
left 520 && { b q-h6 qwen05b tg128 1; o q-h6; }
st done
