#!/bin/bash
# session 11: decode A/B. base = HEAD (shared-counter GEMV tasks); new = contiguous GEMV regions with
# stealing (+ TILELOADDT1 B tiles, rcp silu). (1) kbench GEMV on Qwen/Llama shapes, old vs new
# scheduler; (2) Qwen tg128 interleaved single runs base/new; (3) new beside llama.cpp (Qwen, 5 reps).
# Run: bash .devdeps/run41.sh (carry .devdeps)
R=$(pwd); OUT=${OUT:-/tmp/out}; mkdir -p $OUT; A=$OUT/all41.txt
export LD_LIBRARY_PATH=$R/.devdeps/lib
T0=$(date +%s); st() { echo "== $1 at $(( $(date +%s) - T0 )) s" | tee -a $A; }
st build
P=.devdeps/peer; mkdir -p /tmp/gg /tmp/tb
( PYTHONPATH=$P/gguf-py taskset -c 8-15 timeout 300 python3 $P/make_synth_gguf.py /tmp/gg qwen05b > /tmp/gguf.log 2>&1
  LD_LIBRARY_PATH=$P/lib LLB_BACKEND_DIR=$P/lib taskset -c 8-15 $P/llbench quantize /tmp/gg/qwen05b-bf16.gguf /tmp/gg/qwen05b-q4_0.gguf q4_0 8 >> /tmp/gguf.log 2>&1; touch /tmp/gg/ok ) &
rm -rf /tmp/base; mkdir /tmp/base; cp -r Makefile src include tools /tmp/base/; cp -r .devdeps/s11base/src /tmp/base/; ln -s $R/.devdeps /tmp/base/.devdeps
( cd /tmp/base && taskset -c 4-7 sh .devdeps/build.sh build/tandem build/kbench > /tmp/bbase.log 2>&1 || tail -20 /tmp/bbase.log >> $A; touch /tmp/base/done ) &
taskset -c 0-3 sh .devdeps/build.sh build/tandem build/libtandem.a build/kbench > /tmp/build.log 2>&1 || { tail -40 /tmp/build.log; exit 1; }
taskset -c 8-15 build/tandem synth --like qwen2.5-0.5b -o /tmp/tb/q > /dev/null 2>> $A
taskset -c 8-15 build/tandem convert /tmp/tb/q -o /tmp/tb/q.tdm --threads 8 > /dev/null 2>> $A
while [ ! -f /tmp/base/done ]; do sleep 1; done
cp build/tandem /tmp/td_new; cp build/kbench /tmp/kb_new; cp /tmp/base/build/tandem /tmp/td_base; cp /tmp/base/build/kbench /tmp/kb_base
st gemv
for round in 1 2 3; do for s in "int4g64 1152 896" "int4g64 896 896" "int4g64 9728 896" "int4g64 896 4864" "int8 151936 896" "int4g64 16384 2048" "int4g64 2048 8192"; do for v in base new; do
  echo "gemv $round | $s | $v | $(/tmp/kb_$v -t 2 -s 0.3 -v avx512 gemv $s 1 2>&1 | grep -o '[0-9.]* GB/s')" >> $A
done; done; done
st tg
tg() { timeout 60 "$@" bench /tmp/tb/q.tdm -t 2 --tests tg128 --reps 1 2>/dev/null | grep -o '"tokens_per_s": [0-9.]*' | grep -o '[0-9.]*$'; }
for round in $(seq 1 12); do
  echo "ab $round | base $(tg /tmp/td_base) | new $(tg /tmp/td_new)" >> $A
  [ $(( $(date +%s) - T0 )) -gt 330 ] && break
done
st bench
export LLB_BACKEND_DIR=$R/.devdeps/peer/lib LLB_MAX_FOREIGN=1000
wait
LD_LIBRARY_PATH="$R/.devdeps/lib:$R/.devdeps/peer/lib" timeout 170 build/tandem bench /tmp/tb/q.tdm -t 2 --tests pp512,tg128 --reps 5 --ceilings --peer llama.cpp --peer-model /tmp/gg/qwen05b-q4_0.gguf --peer-bin $R/.devdeps/peer/llbench --md $OUT/x41-qwen05b.md > $OUT/x41-qwen05b.json 2>> /tmp/bench.err
grep -E "bench rep" /tmp/bench.err >> $A; cat $OUT/x41-qwen05b.md >> $A
python3 - $A <<'PY' | tee -a $A
import sys, statistics as st, collections, re
ab = collections.defaultdict(list); gv = collections.defaultdict(list)
for l in open(sys.argv[1]):
    if l.startswith('ab '):
        for part in l.split('|')[1:]:
            w = part.split()
            for x in w[1:]: ab[w[0]].append(float(x))
    if l.startswith('gemv '):
        p = [x.strip() for x in l.split('|')]
        m = re.search(r'([0-9.]+) GB/s', p[3])
        if m: gv[(p[1], p[2])].append(float(m.group(1)))
for k, v in ab.items(): print('tg128', k, 'median %.1f' % st.median(v), 'n', len(v), sorted(round(x, 1) for x in v))
for k, v in sorted(gv.items()): print('gemv', k, 'median %.1f' % st.median(v), v)
PY
st done
