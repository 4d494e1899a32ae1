#!/bin/bash
# session 11: where the threads run. tandem now pins within its affinity mask; llama.cpp's threads are
# not pinned. Qwen tg128 beside llama.cpp: as before (tandem on cpus 0-1, llama.cpp anywhere), then both
# under taskset on the same two cpus (2,3 and 8,9). Run: bash .devdeps/run44.sh (carry .devdeps)
R=$(pwd); OUT=${OUT:-/tmp/out}; mkdir -p $OUT; A=$OUT/all44.txt
export LD_LIBRARY_PATH=$R/.devdeps/lib
T0=$(date +%s); st() { echo "== $1 at $(( $(date +%s) - T0 )) s" | tee -a $A; }
st build
P=.devdeps/peer; mkdir -p /tmp/gg /tmp/tb
( PYTHONPATH=$P/gguf-py taskset -c 10-15 timeout 300 python3 $P/make_synth_gguf.py /tmp/gg qwen05b > /tmp/gguf.log 2>&1
  LD_LIBRARY_PATH=$P/lib LLB_BACKEND_DIR=$P/lib taskset -c 10-15 $P/llbench quantize /tmp/gg/qwen05b-bf16.gguf /tmp/gg/qwen05b-q4_0.gguf q4_0 6 >> /tmp/gguf.log 2>&1; touch /tmp/gg/ok ) &
taskset -c 0-7 sh .devdeps/build.sh build/tandem > /tmp/build.log 2>&1 || { tail -40 /tmp/build.log; exit 1; }
taskset -c 0-7 build/tandem synth --like qwen2.5-0.5b -o /tmp/tb/q > /dev/null 2>> $A
taskset -c 0-7 build/tandem convert /tmp/tb/q -o /tmp/tb/q.tdm --threads 8 > /dev/null 2>> $A
wait
export LLB_BACKEND_DIR=$R/.devdeps/peer/lib LLB_MAX_FOREIGN=1000
for round in 1 2; do for c in none 2,3 8,9; do
  [ $(( $(date +%s) - T0 )) -gt 290 ] && break 2
  st "round $round cpus $c"
  ts=""; [ $c != none ] && ts="taskset -c $c"
  LD_LIBRARY_PATH="$R/.devdeps/lib:$R/.devdeps/peer/lib" timeout 90 $ts build/tandem bench /tmp/tb/q.tdm -t 2 --tests tg128 --reps 4 --peer llama.cpp --peer-model /tmp/gg/qwen05b-q4_0.gguf --peer-bin $R/.devdeps/peer/llbench > /dev/null 2> /tmp/b.err
  grep -E "bench rep" /tmp/b.err | sed "s/^/$c r$round: /" >> $A
done; done
python3 - $A <<'PY' | tee -a $A
import sys, re, statistics as st, collections
d = collections.defaultdict(lambda: ([], []))
for l in open(sys.argv[1]):
    m = re.match(r'(\S+) r\d: bench rep \d+: tg128 hybrid: tandem ([0-9.]+), llama.cpp ([0-9.]+)', l)
    if m: d[m.group(1)][0].append(float(m.group(2))); d[m.group(1)][1].append(float(m.group(3)))
for k, (t, p) in d.items():
    print(f"cpus {k}: tandem median {st.median(t):.1f} {sorted(t)}; llama.cpp {st.median(p):.1f} {sorted(p)}; ratio of medians {st.median(t)/st.median(p):.2f}")
PY
st done
