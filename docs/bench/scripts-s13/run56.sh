#!/bin/bash
# session 13, run 56: is the int4 GEMV compute-bound on the Xeon? kbench in cache (-m 1, weights
# cycled through 1 MiB: the shape's one copy, L2/L3) against DRAM (-m 512), 1 and 2 threads, int4 vs int8
R=$(pwd); OUT=${OUT:-/tmp/out}; mkdir -p $OUT; A=$OUT/all56.txt
export LD_LIBRARY_PATH=$R/.devdeps/lib
sh .devdeps/build.sh build/kbench > /tmp/b.log 2>&1 || { tail -20 /tmp/b.log >> $A; exit 1; }
for round in 1 2 3; do
  echo "r$round $(build/kbench -t 1 -s 0.5 mem 2>&1 | tail -1)" >> $A
  for t in 1 2; do for m in 1 512; do for s in "int4g64 4864 896 1" "int8 4864 896 1" "int4g64 896 4864 1"; do
    echo "r$round t$t m$m $s: $(build/kbench -t $t -s 0.3 -m $m -v avx512 gemv $s 2>&1 | head -1 | grep -o 'ok .*')" >> $A
  done; done; done
done
python3 - $A <<'PY' | tee -a $A
import sys, re, statistics as st, collections
d = collections.defaultdict(list)
for l in open(sys.argv[1]):
    m = re.match(r'r\d (t\d m\d+ [a-z0-9]+ \d+ \d+ \d+): ok\s+([0-9.]+) GB/s', l)
    if m: d[m.group(1)].append(float(m.group(2)))
for k in d: print(f"{k:32s} {st.median(d[k]):5.1f} GB/s {d[k]}")
PY
grep memread $A
