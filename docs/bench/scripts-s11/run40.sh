#!/bin/bash
# session 11: (1) Qwen pp512 A/B, interleaved single runs: base (HEAD: B tiles via TILELOADD, silu by
# divide) vs new (TILELOADDT1 B tiles, rcp14+Newton silu) vs new + TANDEM_GLU=1; (2) GEMV task share
# variants on Qwen's body shapes; (3) new beside llama.cpp, Qwen and Llama, pp512 + tg128.
# Run: bash .devdeps/run40.sh (carry .devdeps)
R=$(pwd); OUT=${OUT:-/tmp/out}; mkdir -p $OUT; A=$OUT/all40.txt
export LD_LIBRARY_PATH=$R/.devdeps/lib
T0=$(date +%s); st() { echo "== $1 at $(( $(date +%s) - T0 )) s" | tee -a $A; }
lscpu | grep -E "Model name|^CPU\(s\)" >> $A
st build
P=.devdeps/peer; mkdir -p /tmp/gg /tmp/tb
for m in qwen05b llama1b; do
 ( PYTHONPATH=$P/gguf-py taskset -c 8-15 timeout 300 python3 $P/make_synth_gguf.py /tmp/gg $m > /tmp/gguf_$m.log 2>&1
   LD_LIBRARY_PATH=$P/lib LLB_BACKEND_DIR=$P/lib taskset -c 8-15 $P/llbench quantize /tmp/gg/$m-bf16.gguf /tmp/gg/$m-q4_0.gguf q4_0 8 >> /tmp/gguf_$m.log 2>&1; touch /tmp/gg/$m.ok ) &
done
rm -rf /tmp/base; mkdir /tmp/base; cp -r Makefile src include tools /tmp/base/; cp -r .devdeps/s11base/src /tmp/base/; ln -s $R/.devdeps /tmp/base/.devdeps
( cd /tmp/base && taskset -c 4-7 sh .devdeps/build.sh build/tandem > /tmp/bbase.log 2>&1 || tail -20 /tmp/bbase.log >> $A ) &
taskset -c 0-3 sh .devdeps/build.sh build/tandem build/libtandem.a build/kbench > /tmp/build.log 2>&1 || { tail -40 /tmp/build.log; exit 1; }
while [ ! -x /tmp/base/build/tandem ]; do sleep 1; [ $(( $(date +%s) - T0 )) -gt 200 ] && break; done
cp build/tandem /tmp/td_new; cp /tmp/base/build/tandem /tmp/td_base
CF="-O2 -std=c11 -D_GNU_SOURCE -Isrc -Iinclude -I.devdeps/include -I.devdeps/include/cjson"
LL="-L.devdeps/lib -lcjson -lpcre2-8 -lutf8proc -lmicrohttpd -lm -pthread"
gcc $CF -DGEMV_SHARE=1 -c src/engine/cpu/kdispatch.c -o /tmp/kd1.o && gcc $CF tools/kbench.c /tmp/kd1.o build/libtandem.a $LL -o /tmp/kb_s1
gcc $CF -DGEMV_SHARE=4 -c src/engine/cpu/kdispatch.c -o /tmp/kd4.o && gcc $CF tools/kbench.c /tmp/kd4.o build/libtandem.a $LL -o /tmp/kb_s4
cp build/kbench /tmp/kb_s2
taskset -c 8-15 build/tandem synth --like qwen2.5-0.5b -o /tmp/tb/q > /dev/null 2>> $A
taskset -c 8-15 build/tandem convert /tmp/tb/q -o /tmp/tb/q.tdm --threads 8 > /dev/null 2>> $A
( taskset -c 8-15 build/tandem synth --like llama-3.2-1b -o /tmp/tb/l > /dev/null 2>> $A
  taskset -c 8-15 build/tandem convert /tmp/tb/l -o /tmp/tb/l.tdm --threads 8 > /dev/null 2>> $A ) &
st ab
pp() { timeout 60 "$@" bench /tmp/tb/q.tdm -t 2 --tests pp512 --reps 2 2>/dev/null | grep -o '"tokens_per_s": [0-9.]*' | grep -o '[0-9.]*$'; }
for round in $(seq 1 12); do
  echo "ab $round | base $(pp /tmp/td_base) | new $(pp /tmp/td_new) | glu $(TANDEM_GLU=1 pp /tmp/td_new)" >> $A
  [ $(( $(date +%s) - T0 )) -gt 260 ] && break
done
st gemv
for round in 1 2 3; do for s in "1152 896" "896 896" "9728 896" "896 4864"; do for v in s1 s2 s4; do
  echo "gemv $round | $s | $v | $(/tmp/kb_$v -t 2 -s 0.3 -v avx512 gemv int4g64 $s 1 2>&1 | grep -o '[0-9.]* GB/s')" >> $A
done; done; done
st benches
export LLB_BACKEND_DIR=$R/.devdeps/peer/lib LLB_MAX_FOREIGN=1000
wait
for b in q:qwen05b:5 l:llama1b:3; do IFS=: read t g n <<< "$b"; st "bench $g"
  [ -f /tmp/gg/$g.ok ] || { echo "no gguf $g: $(tail -3 /tmp/gguf_$g.log)" >> $A; continue; }
  LD_LIBRARY_PATH="$R/.devdeps/lib:$R/.devdeps/peer/lib" timeout 150 build/tandem bench /tmp/tb/$t.tdm -t 2 --tests pp512,tg128 --reps $n --ceilings --peer llama.cpp --peer-model /tmp/gg/$g-q4_0.gguf --peer-bin $R/.devdeps/peer/llbench --md $OUT/x-$g.md > $OUT/x-$g.json 2>> /tmp/bench_$g.err
  grep -E "bench rep" /tmp/bench_$g.err >> $A; cat $OUT/x-$g.md >> $A
  [ $(( $(date +%s) - T0 )) -gt 480 ] && break
done
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
        if m: gv[(p[1], p[2].split()[0])].append(float(m.group(1)))
for k, v in ab.items(): print('pp512', k, 'median %.0f' % st.median(v), 'n', len(v), sorted(round(x) for x in v))
for k, v in sorted(gv.items()): print('gemv', k, 'median %.1f' % st.median(v), v)
PY
st done
