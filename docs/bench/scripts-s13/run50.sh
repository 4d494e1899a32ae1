#!/bin/bash
# session 13, run 50: the int4 GEMV with exact int32 offset correction + 16-row tiles (working tree)
# against the session-12 kernel (.devdeps/s13base = HEAD bc415b2): kbench A/B on the decode shapes,
# then tg128 beside llama.cpp Q4_0 (new) interleaved with the base build, Qwen and Llama shapes.
R=$(pwd); OUT=${OUT:-/tmp/out}; mkdir -p $OUT; A=$OUT/all50.txt
export LD_LIBRARY_PATH=$R/.devdeps/lib
T0=$(date +%s); st() { echo "== $1 at $(( $(date +%s) - T0 )) s" | tee -a $A; }
lscpu | grep -iE "model name|L2|L3|Thread|MHz" >> $A
st build
P=.devdeps/peer; mkdir -p /tmp/gg
( for m in qwen05b llama1b; do PYTHONPATH=$P/gguf-py timeout 200 python3 $P/make_synth_gguf.py /tmp/gg $m > /tmp/gguf-$m.log 2>&1
  LD_LIBRARY_PATH=$P/lib LLB_BACKEND_DIR=$P/lib $P/llbench quantize /tmp/gg/$m-bf16.gguf /tmp/gg/$m-q4_0.gguf q4_0 6 >> /tmp/gguf-$m.log 2>&1; rm -f /tmp/gg/$m-bf16.gguf; done ) &
GG=$!
sh .devdeps/build.sh build/tandem build/kbench > /tmp/build.log 2>&1 || { tail -40 /tmp/build.log | tee -a $A; exit 1; }
D=$R/.devdeps
( cd .devdeps/s13base && make -j16 CC="gcc -I$D/include -I$D/include/cjson -L$D/lib -Wl,-rpath,$D/lib" build/tandem build/kbench > /tmp/build0.log 2>&1 ) || { tail -20 /tmp/build0.log | tee -a $A; exit 1; }
NEW=$R/build; OLD=$R/.devdeps/s13base/build
mkdir -p /tmp/tb
for m in qwen2.5-0.5b:q llama-3.2-1b:l; do build/tandem synth --like ${m%%:*} -o /tmp/tb/${m##*:} > /dev/null
  build/tandem convert /tmp/tb/${m##*:} -o /tmp/tb/${m##*:}.tdm --threads 8 > /dev/null 2>> $A
  [ ${m##*:} = q ] && build/tandem convert /tmp/tb/q -o /tmp/tb/q-h6.tdm --head-enc int6g64 --threads 8 > /dev/null 2>> $A
  rm -rf /tmp/tb/${m##*:}; done
st kbench
for round in 1 2; do
  echo "r$round $($NEW/kbench -t 2 -s 0.5 mem 2>&1 | tail -1)" >> $A
  for s in "int4g64 1152 896 1" "int4g64 896 896 1" "int4g64 9728 896 1" "int4g64 896 4864 1" "int6g64 151936 896 1" "int4g64 3072 2048 1" "int4g64 16384 2048 1" "int4g64 2048 8192 1" "int4g64 9728 896 8" "int4g64 896 4864 8"; do
    for v in OLD NEW; do eval d=\$$v; echo "r$round $v $s: $($d/kbench -t 2 -s 0.3 -v avx512 gemv $s 2>&1 | head -1 | grep -o 'ok .*')" >> $A; done
  done
done
python3 - $A <<'PY' | tee -a $A
import sys, re, statistics as st, collections
d = collections.defaultdict(list); mem = []
for l in open(sys.argv[1]):
    m = re.match(r'r\d (OLD|NEW) ([a-z0-9]+ \d+ \d+ \d+): ok\s+([0-9.]+) GB/s', l)
    if m: d[(m.group(2), m.group(1))].append(float(m.group(3)))
    m = re.search(r'memread.*: ([0-9.]+) GB/s', l)
    if m: mem.append(float(m.group(1)))
print(f"memread median {st.median(mem):.1f} GB/s {mem}")
for s in dict.fromkeys(k[0] for k in d):
    o, n = st.median(d[(s,'OLD')]), st.median(d[(s,'NEW')])
    print(f"{s:24s} old {o:5.1f} new {n:5.1f} GB/s  x{n/o:.2f}  {d[(s,'OLD')]} {d[(s,'NEW')]}")
PY
wait $GG; tail -1 /tmp/gguf-qwen05b.log >> $A; ls -la /tmp/gg /tmp/tb >> $A
st bench
export LLB_BACKEND_DIR=$R/.devdeps/peer/lib LLB_MAX_FOREIGN=1000
BL="$R/.devdeps/lib:$R/.devdeps/peer/lib"
b() { LD_LIBRARY_PATH=$BL timeout 150 $NEW/tandem bench /tmp/tb/$1.tdm -t 2 --tests $3 --reps 3 --ceilings --peer llama.cpp --peer-model /tmp/gg/$2-q4_0.gguf --peer-bin $R/.devdeps/peer/llbench --md $OUT/r50-$1-$4.md > $OUT/r50-$1-$4.json 2>> $A; echo "NEW+peer $1 $4: $(grep -E '^\| (pp512|tg128)' $OUT/r50-$1-$4.md | tr '\n' ' ')" >> $A; }
o() { echo "OLD $1: $(timeout 100 $OLD/tandem bench /tmp/tb/$1.tdm -t 2 --tests tg128 --reps 3 2>/dev/null | grep -o '"tokens_per_s": [0-9.]*')" >> $A; }
left() { [ $(( $(date +%s) - T0 )) -lt $1 ]; }
b q qwen05b pp512,tg128 1; o q
left 440 && { b q-h6 qwen05b tg128 1; o q-h6; }
left 470 && { b l llama1b pp512,tg128 1; o l; }
left 520 && { b q qwen05b tg128 2; o q; }
left 550 && { b l llama1b tg128 2; o l; }
st done
