#!/bin/bash
# session 12, run 49: the decode GEMVs of the Qwen and Llama shapes on the Xeon, 2 threads, GB/s beside memread
R=$(pwd); OUT=${OUT:-/tmp/out}; mkdir -p $OUT; A=$OUT/all49.txt
export LD_LIBRARY_PATH=$R/.devdeps/lib
sh .devdeps/build.sh build/kbench > /tmp/build.log 2>&1 || { tail -30 /tmp/build.log | tee -a $A; exit 1; }
for round in 1 2 3; do
  echo "r$round $(build/kbench -t 2 -s 0.5 mem 2>&1 | tail -1)" >> $A
  for s in "int4g64 1152 896" "int4g64 896 896" "int4g64 9728 896" "int4g64 896 4864" "int8 151936 896" "int6g64 151936 896" "int4g64 3072 2048" "int4g64 2048 2048" "int4g64 16384 2048" "int4g64 2048 8192"; do
    echo "r$round $s: $(build/kbench -t 2 -s 0.4 -v avx512 gemv $s 1 2>&1 | head -1 | grep -o 'ok .*')" >> $A
  done
done
python3 - $A <<'PY' | tee -a $A
import sys, re, statistics as st, collections
d = collections.defaultdict(list); us = collections.defaultdict(list); mem = []
for l in open(sys.argv[1]):
    m = re.match(r'r\d ([a-z0-9]+ \d+ \d+): ok\s+([0-9.]+) GB/s.*?([0-9.]+) us per call', l)
    if m: d[m.group(1)].append(float(m.group(2))); us[m.group(1)].append(float(m.group(3)))
    m = re.search(r'memread.*: ([0-9.]+) GB/s', l)
    if m: mem.append(float(m.group(1)))
print(f"memread median {st.median(mem):.1f} GB/s {mem}")
for k in d: print(f"{k:22s} {st.median(d[k]):5.1f} GB/s  {st.median(us[k]):8.1f} us  {d[k]}")
PY
