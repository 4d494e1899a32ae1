#!/bin/bash
# session 10: perf (cpu-clock) on the Xeon: Qwen tg128 and pp512, and decode attention (kbench).
R=$(pwd); OUT=${OUT:-/tmp/out}; mkdir -p $OUT; A=$OUT/all36.txt
export LD_LIBRARY_PATH=$R/.devdeps/lib
T0=$(date +%s); st() { echo "== $1 at $(( $(date +%s) - T0 )) s" | tee -a $A; }
mkdir -p /tmp/pp && tar -C /tmp/pp -xJf .devprof/perf.tar.xz
PERF() { LD_LIBRARY_PATH=/tmp/pp/lib /tmp/pp/perf "$@"; }
st build
sh .devdeps/build.sh build/tandem build/libtandem.a build/kbench > /tmp/build.log 2>&1 || { tail -40 /tmp/build.log; exit 1; }
if [ ! -f /tmp/tb/q.tdm ]; then mkdir -p /tmp/tb; build/tandem synth --like qwen2.5-0.5b -o /tmp/tb/q > /dev/null; build/tandem convert /tmp/tb/q -o /tmp/tb/q.tdm --threads 8 > /dev/null; fi
PERF --version >> $A 2>&1
cat /proc/sys/kernel/perf_event_paranoid >> $A
rep() { PERF report -i $1 --no-children --sort symbol 2>>$A | grep "%" | head -${2:-25} >> $A; }
st tg128
PERF record -e cpu-clock -F 4000 -o /tmp/p1.data -- build/tandem bench /tmp/tb/q.tdm -t 2 --tests tg128 --reps 3 > /dev/null 2>> $A; rep /tmp/p1.data
PERF annotate -i /tmp/p1.data --stdio -s q4_rows 2>/dev/null | sort -rn | head -25 >> $A
st pp512
PERF record -e cpu-clock -F 4000 -o /tmp/p2.data -- build/tandem bench /tmp/tb/q.tdm -t 2 --tests pp512 --reps 3 > /dev/null 2>> $A; rep /tmp/p2.data 30
st attn
PERF record -e cpu-clock -F 4000 -o /tmp/p3.data -- build/kbench -t 2 -s 2 -v avx512 attn bf16 8192 1 32 8 64 >> $A 2>&1; rep /tmp/p3.data 12
PERF annotate -i /tmp/p3.data --stdio -s dc_task_avx512 2>/dev/null | sort -rn | head -20 >> $A
st done
