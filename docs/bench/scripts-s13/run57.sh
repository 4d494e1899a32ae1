#!/bin/bash
# session 13, run 57: GFNI for the int4 high nibbles (one vgf2p8affineqb for shift + and; -DQ4_GFNI -mgfni, a
# measurement build) on the Xeon: in cache, 1 thread (the compute limit) and from DRAM, 2 threads
R=$(pwd); OUT=${OUT:-/tmp/out}; mkdir -p $OUT; A=$OUT/all57.txt
export LD_LIBRARY_PATH=$R/.devdeps/lib
sh .devdeps/build.sh BUILD=/tmp/ng /tmp/ng/kbench > /tmp/b1.log 2>&1 &
sh .devdeps/build.sh BUILD=/tmp/gf CFLAGS="-O2 -g -DQ4_GFNI -mgfni" /tmp/gf/kbench /tmp/gf/tests/test_kernels > /tmp/b2.log 2>&1 &
wait
/tmp/gf/tests/test_kernels 2>&1 | tail -1 >> $A
for round in 1 2 3 4; do
  for tm in "1 1" "2 512"; do set -- $tm; for s in "int4g64 4864 896 1" "int4g64 896 4864 1" "int6g64 4864 896 1"; do
    for v in ng gf; do echo "r$round $v t$1 m$2 $s: $(/tmp/$v/kbench -t $1 -m $2 -s 0.3 -v avx512 gemv $s 2>&1 | head -1 | grep -o 'ok .*')" >> $A; done
  done; done
done
python3 - $A <<'PY' | tee -a $A
import sys, re, statistics as st, collections
d = collections.defaultdict(list)
for l in open(sys.argv[1]):
    m = re.match(r'r\d (ng|gf) (t\d m\d+ [a-z0-9]+ \d+ \d+ \d+): ok\s+([0-9.]+) GB/s', l)
    if m: d[(m.group(2), m.group(1))].append(float(m.group(3)))
for s in dict.fromkeys(k[0] for k in d):
    o, n = st.median(d[(s,'ng')]), st.median(d[(s,'gf')])
    print(f"{s:32s} ng {o:5.1f} gf {n:5.1f} GB/s  x{n/o:.2f}  {d[(s,'ng')]} {d[(s,'gf')]}")
PY
