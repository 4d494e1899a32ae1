#!/bin/bash
# session 11: panels per group (AMX_PG 4 ships; 8, 16) with the TILELOADDT1 B tiles, paired with the peak.
# Run: bash .devdeps/run43.sh (carry .devdeps)
R=$(pwd); OUT=${OUT:-/tmp/out}; mkdir -p $OUT; A=$OUT/all43.txt
export LD_LIBRARY_PATH=$R/.devdeps/lib
T0=$(date +%s); st() { echo "== $1 at $(( $(date +%s) - T0 )) s" | tee -a $A; }
st build
sh .devdeps/build.sh build/libtandem.a > /tmp/build.log 2>&1 || { tail -40 /tmp/build.log; exit 1; }
CF="-O2 -std=c11 -D_GNU_SOURCE -Isrc -Iinclude -I.devdeps/include -I.devdeps/include/cjson -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512bf16 -mavx512vnni -mamx-tile -mamx-bf16 -mamx-int8 -mfma -mf16c"
LL="-L.devdeps/lib -lcjson -lpcre2-8 -lutf8proc -lmicrohttpd -lm -pthread"
V="pg4:-DAMX_PG=4 pg8:-DAMX_PG=8 pg16:-DAMX_PG=16"
for v in $V; do n=${v%%:*}; f=${v#*:}
  ( gcc $CF $f -c src/engine/cpu/gemm_amx.c -o /tmp/g_$n.o && gcc $CF tools/kbench.c /tmp/g_$n.o build/libtandem.a $LL -o /tmp/kb_$n || echo "build $n failed" >> $A ) &
done; wait
st amx
SH="int8_512_1152_896 int8_512_9728_896 int8_512_896_4864 int8_512_2048_2048 int8_512_8192_2048 int8_512_2048_8192"
for round in 1 2 3 4; do for s in $SH; do s=$(echo $s | tr _ " "); for v in $V; do n=${v%%:*}
  [ $(( $(date +%s) - T0 )) -gt 300 ] && break 3
  o=$(/tmp/kb_$n -t 2 -s 0.3 -p 3 -v amx gemm $s 2>&1)
  echo "$o" | grep -q INVALID && echo "INVALID $n $s" >> $A
  echo "$round|$s|$n|$(echo "$o" | grep -o 'median [0-9.]* GFLOP/s, median [0-9.]*%' | grep -o '[0-9.]*%')" >> $A
done; done; done
python3 - $A <<'PY' | tee -a $A
import sys, statistics, collections
d = collections.defaultdict(list)
for l in open(sys.argv[1]):
    p = l.strip().split('|')
    if len(p) == 4 and p[3]: d[(p[1], p[2])].append(float(p[3].rstrip('%')))
for s in sorted({k[0] for k in d}):
    print(s, ' '.join(f"{v}:{statistics.median(d[(s, v)]):.1f}%" + str([round(x, 1) for x in d[(s, v)]]) for v in ['pg4', 'pg8', 'pg16'] if d[(s, v)]))
PY
st done
