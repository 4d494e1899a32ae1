#!/bin/bash
# session 12, run 46: (a) Qwen pp512 with TANDEM_PROFILE, interleaved: shipped build, the fused
# gate/up GEMM (TANDEM_GLU=1), and a build without the activation pass's prefetch (-DACT_PF=0);
# (b) Qwen and Llama pp512 + tg128 beside llama.cpp Q4_0, int8 head (default) and int6 head.
R=$(pwd); OUT=${OUT:-/tmp/out}; mkdir -p $OUT; A=$OUT/all46.txt
export LD_LIBRARY_PATH=$R/.devdeps/lib
T0=$(date +%s); st() { echo "== $1 at $(( $(date +%s) - T0 )) s" | tee -a $A; }
lscpu | grep -iE "model name|L2|L3|Thread" >> $A
st build
sh .devdeps/build.sh build/tandem build/libtandem.a build/kbench > /tmp/build.log 2>&1 || { tail -40 /tmp/build.log | tee -a $A; exit 1; }
P=.devdeps/peer; mkdir -p /tmp/gg
( for m in qwen05b llama1b; do PYTHONPATH=$P/gguf-py timeout 200 python3 $P/make_synth_gguf.py /tmp/gg $m > /tmp/gguf-$m.log 2>&1
  LD_LIBRARY_PATH=$P/lib LLB_BACKEND_DIR=$P/lib $P/llbench quantize /tmp/gg/$m-bf16.gguf /tmp/gg/$m-q4_0.gguf q4_0 6 >> /tmp/gguf-$m.log 2>&1; rm -f /tmp/gg/$m-bf16.gguf; done ) &
GG=$!
CB="-O2 -g -std=c11 -D_GNU_SOURCE -Isrc -Iinclude -Ibuild/gen -I.devdeps/include -I.devdeps/include/cjson -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512vnni -mavx512bf16 -mfma -mf16c"
LL="-L.devdeps/lib -lcjson -lpcre2-8 -lutf8proc -lmicrohttpd -lm -pthread"
gcc $CB -DACT_PF=0 -c src/engine/cpu/ops_avx512.c -o /tmp/ops_nopf.o && gcc -o /tmp/td_nopf build/obj/src/cli/*.o /tmp/ops_nopf.o build/libtandem.a $LL 2>> $A
cp build/tandem /tmp/td
mkdir -p /tmp/tb
for m in qwen2.5-0.5b:q llama-3.2-1b:l; do build/tandem synth --like ${m%%:*} -o /tmp/tb/${m##*:} > /dev/null
  build/tandem convert /tmp/tb/${m##*:} -o /tmp/tb/${m##*:}.tdm --threads 8 > /dev/null 2>> $A
  build/tandem convert /tmp/tb/${m##*:} -o /tmp/tb/${m##*:}-h6.tdm --head-enc int6g64 --threads 8 > /dev/null 2>> $A; rm -rf /tmp/tb/${m##*:}; done
wait $GG; tail -1 /tmp/gguf-qwen05b.log >> $A; ls -la /tmp/gg /tmp/tb >> $A
st ab
pp() { TANDEM_PROFILE=1 timeout 40 "$@" bench /tmp/tb/q.tdm -t 2 --tests pp512 --reps 2 2>/tmp/pe.txt | grep -o '"tokens_per_s": [0-9.]*' | grep -o '[0-9.]*$' | tr '\n' ' '; grep -o 'prefill: .*' /tmp/pe.txt | head -1; }
for round in $(seq 1 12); do
  [ $(( $(date +%s) - T0 )) -gt 240 ] && break
  echo "ab $round | base $(TANDEM_GLU=0 pp /tmp/td) | glu $(TANDEM_GLU=1 pp /tmp/td) | nopf $(TANDEM_GLU=0 pp /tmp/td_nopf)" >> $A
done
python3 - $A <<'PY' | tee -a $A
import sys, re, statistics as st, collections
tp = collections.defaultdict(list); act = collections.defaultdict(list); mm = collections.defaultdict(list)
for l in open(sys.argv[1]):
    if not l.startswith('ab '): continue
    for part in l.split('|')[1:]:
        m = re.match(r'\s*(\w+) ([0-9.]+) .*prefill: \d+ calls, ([0-9.]+) s: matmul ([0-9.]+)%.*activation\+prepare ([0-9.]+)%', part)
        if not m: continue
        k = m.group(1); tot = float(m.group(3))
        tp[k].append(float(m.group(2))); mm[k].append(tot * float(m.group(4)) / 100); act[k].append(tot * float(m.group(5)) / 100)
for k in tp:
    print(f"{k}: pp512 median {st.median(tp[k]):.0f} t/s {sorted(round(x) for x in tp[k])}; matmul {st.median(mm[k]):.3f} s, activation+prepare {st.median(act[k]):.3f} s (per profile, medians)")
PY
st peer
export LLB_BACKEND_DIR=$R/.devdeps/peer/lib LLB_MAX_FOREIGN=1000
BL="$R/.devdeps/lib:$R/.devdeps/peer/lib"
b() { LD_LIBRARY_PATH=$BL timeout 150 build/tandem bench /tmp/tb/$1.tdm -t 2 --tests $3 --reps $4 --ceilings --peer llama.cpp --peer-model /tmp/gg/$2-q4_0.gguf --peer-bin $R/.devdeps/peer/llbench --md $OUT/r46-$1-$5.md > $OUT/r46-$1-$5.json 2>> $A; echo "$1 $5: $(grep -E '^\| (pp512|tg128)' $OUT/r46-$1-$5.md | tr '\n' ' ')" >> $A; }
b q qwen05b pp512,tg128 3 1
b q-h6 qwen05b tg128 3 1
b l llama1b pp512,tg128 3 1
b q-h6 qwen05b tg128 3 2
b q qwen05b tg128 3 2
st done
