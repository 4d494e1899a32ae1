#!/bin/bash
# session 13, run 55: int4/int6 GEMV with 2 rows side by side (-DQ4_ROWS=2; lost 12-15% on Zen 4) on the Xeon
R=$(pwd); OUT=${OUT:-/tmp/out}; mkdir -p $OUT; A=$OUT/all55.txt
export LD_LIBRARY_PATH=$R/.devdeps/lib
T0=$(date +%s)
sh .devdeps/build.sh BUILD=/tmp/r1 /tmp/r1/kbench > /tmp/b1.log 2>&1 &
sh .devdeps/build.sh BUILD=/tmp/r2 CFLAGS="-O2 -g -DQ4_ROWS=2" /tmp/r2/kbench > /tmp/b2.log 2>&1 &
wait; echo "built at $(( $(date +%s) - T0 )) s" >> $A
for round in 1 2 3; do
  echo "r$round $(/tmp/r1/kbench -t 2 -s 0.5 mem 2>&1 | tail -1)" >> $A
  for s in "int4g64 1152 896 1" "int4g64 9728 896 1" "int4g64 896 4864 1" "int6g64 151936 896 1" "int4g64 2048 8192 1"; do
    for v in r1 r2; do echo "r$round $v $s: $(/tmp/$v/kbench -t 2 -s 0.3 -v avx512 gemv $s 2>&1 | head -1 | grep -o 'ok .*')" >> $A; done
  done
  [ $(( $(date +%s) - T0 )) -gt 300 ] && break
done
python3 - $A <<'PY' | tee -a $A
import sys, re, statistics as st, collections
d = collections.defaultdict(list); mem = []
for l in open(sys.argv[1]):
    m = re.match(r'r\d (r1|r2) ([a-z0-9]+ \d+ \d+ \d+): ok\s+([0-9.]+) GB/s', l)
    if m: d[(m.group(2), m.group(1))].append(float(m.group(3)))
    m = re.search(r'memread.*: ([0-9.]+) GB/s', l)
    if m: mem.append(float(m.group(1)))
print(f"memread median {st.median(mem):.1f} GB/s {mem}")
for s in dict.fromkeys(k[0] for k in d):
    o, n = st.median(d[(s,'r1')]), st.median(d[(s,'r2')])
    print(f"{s:24s} r1 {o:5.1f} r2 {n:5.1f} GB/s  x{n/o:.2f}  {d[(s,'r1')]} {d[(s,'r2')]}")
PY
