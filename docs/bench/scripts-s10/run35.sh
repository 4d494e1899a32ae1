#!/bin/bash
# session 10: where the Xeon's time goes on the Qwen2.5-0.5B shape (default package): TANDEM_PROFILE
# splits, GEMV rates per body shape, and a perf profile (cpu-clock) if the carried perf runs here.
# Run: bash .devprof/run35.sh (carry .devdeps/lib .devdeps/include .devdeps/build.sh .devprof)
R=$(pwd); OUT=${OUT:-/tmp/out}; mkdir -p $OUT; A=$OUT/all35.txt
export LD_LIBRARY_PATH=$R/.devdeps/lib
T0=$(date +%s); st() { echo "== $1 at $(( $(date +%s) - T0 )) s" | tee -a $A; }
st build
sh .devdeps/build.sh build/tandem build/libtandem.a build/kbench > /tmp/build.log 2>&1 || { tail -40 /tmp/build.log; exit 1; }
mkdir -p /tmp/tb
( build/tandem synth --like qwen2.5-0.5b -o /tmp/tb/q > /dev/null 2>> $A
  build/tandem convert /tmp/tb/q -o /tmp/tb/q.tdm --threads 8 > /dev/null 2>> $A ) &
st kbench
build/kbench -t 2 -s 0.5 mem >> $A 2>&1
for round in 1 2; do for s in "int4g64 1152 896" "int4g64 9728 896" "int4g64 896 896" "int4g64 896 4864" "int8 151936 896"; do
  echo "$round | $s | $(build/kbench -t 2 -s 0.3 -v avx512 gemv $s 1 2>&1 | grep v2 | grep -o '[0-9.]* GB/s.*per call')" >> $A
done; done
wait
st profile
for t in tg128 pp512; do
  TANDEM_PROFILE=1 timeout 100 build/tandem bench /tmp/tb/q.tdm -t 2 --tests $t --reps 3 2>&1 | grep -i "profile\|tokens_per_s" >> $A
done
st perf
chmod +x .devprof/perf
./.devprof/perf --version >> $A 2>&1
./.devprof/perf record -e cpu-clock -F 2000 -o /tmp/p.data -- build/tandem bench /tmp/tb/q.tdm -t 2 --tests tg128 --reps 3 > /dev/null 2>> $A && \
  ./.devprof/perf report -i /tmp/p.data --no-children --sort symbol 2>/dev/null | grep "%" | head -30 >> $A
./.devprof/perf record -e cpu-clock -F 2000 -o /tmp/p2.data -- build/tandem bench /tmp/tb/q.tdm -t 2 --tests pp512 --reps 3 > /dev/null 2>> $A && \
  ./.devprof/perf report -i /tmp/p2.data --no-children --sort symbol 2>/dev/null | grep "%" | head -30 >> $A
st done
