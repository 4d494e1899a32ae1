#!/bin/bash
# session 13, run 54: the GEMV prefetch distances on the Xeon (tuned on Zen 4 for L2, session 9):
# kbench, 2 threads, from DRAM, variants L1/L2 = 2048/8192 (shipped), 2048/16384, 4096/16384, 4096/8192, 1024/4096
R=$(pwd); OUT=${OUT:-/tmp/out}; mkdir -p $OUT; A=$OUT/all54.txt
export LD_LIBRARY_PATH=$R/.devdeps/lib
T0=$(date +%s)
V="2048:8192 2048:16384 4096:16384 4096:8192 1024:4096"
for v in $V; do p1=${v%%:*}; p2=${v##*:}
  sh .devdeps/build.sh BUILD=/tmp/p$p1-$p2 CFLAGS="-O2 -g -DQ4_PREFETCH=$p1 -DQ4_PREFETCH_L2=$p2" /tmp/p$p1-$p2/kbench > /tmp/b.log 2>&1 &
done; wait
echo "built at $(( $(date +%s) - T0 )) s" >> $A
for round in 1 2 3; do
  echo "r$round $(/tmp/p2048-8192/kbench -t 2 -s 0.5 mem 2>&1 | tail -1)" >> $A
  for s in "int4g64 9728 896 1" "int4g64 896 4864 1" "int4g64 1152 896 1" "int8 151936 896 1"; do
    for v in $V; do p1=${v%%:*}; p2=${v##*:}
      echo "r$round $v $s: $(/tmp/p$p1-$p2/kbench -t 2 -s 0.3 -v avx512 gemv $s 2>&1 | head -1 | grep -o 'ok .*')" >> $A; done
  done
  [ $(( $(date +%s) - T0 )) -gt 400 ] && break
done
python3 - $A <<'PY' | tee -a $A
import sys, re, statistics as st, collections
d = collections.defaultdict(list); mem = []
for l in open(sys.argv[1]):
    m = re.match(r'r\d (\d+:\d+) ([a-z0-9]+ \d+ \d+ \d+): ok\s+([0-9.]+) GB/s', l)
    if m: d[(m.group(2), m.group(1))].append(float(m.group(3)))
    m = re.search(r'memread.*: ([0-9.]+) GB/s', l)
    if m: mem.append(float(m.group(1)))
print(f"memread median {st.median(mem):.1f} GB/s {mem}")
for s in dict.fromkeys(k[0] for k in d):
    print(s + ": " + "  ".join(f"{v} {st.median(d[(s, v)]):.1f}" for v in dict.fromkeys(k[1] for k in d if k[0] == s)))
PY
echo "done at $(( $(date +%s) - T0 )) s" >> $A
