#!/bin/bash
# session 11: (B) Qwen pp512, int8-head vs int6-head package, interleaved, with TANDEM_PROFILE and THP
# counts; (A) AMX GEMM variants (B tiles via TILELOADDT1, K chunk 16, 8 panels per group, MB 512)
# paired with the tile peak. Run: bash .devdeps/run39.sh (carry .devdeps)
R=$(pwd); OUT=${OUT:-/tmp/out}; mkdir -p $OUT; A=$OUT/all39.txt
export LD_LIBRARY_PATH=$R/.devdeps/lib
T0=$(date +%s); st() { echo "== $1 at $(( $(date +%s) - T0 )) s" | tee -a $A; }
{ lscpu | grep -E "Model name|NUMA|^CPU\(s\)|Thread"; cat /sys/kernel/mm/transparent_hugepage/enabled /sys/kernel/mm/transparent_hugepage/defrag; grep -i huge /proc/meminfo; } >> $A 2>&1
st build
sh .devdeps/build.sh build/tandem build/libtandem.a > /tmp/build.log 2>&1 || { tail -40 /tmp/build.log; exit 1; }
mkdir -p /tmp/tb
( taskset -c 8-15 build/tandem synth --like qwen2.5-0.5b -o /tmp/tb/q > /dev/null 2>> $A
  taskset -c 8-15 build/tandem convert /tmp/tb/q -o /tmp/tb/q-def.tdm --threads 8 > /dev/null 2>> $A
  taskset -c 8-15 build/tandem convert /tmp/tb/q -o /tmp/tb/q-h6.tdm --head-enc int6g64 --threads 8 > /dev/null 2>> $A
  touch /tmp/tb/ready ) &
CF="-O2 -std=c11 -D_GNU_SOURCE -Isrc -Iinclude -I.devdeps/include -I.devdeps/include/cjson -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512bf16 -mavx512vnni -mamx-tile -mamx-bf16 -mamx-int8 -mfma -mf16c"
LL="-L.devdeps/lib -lcjson -lpcre2-8 -lutf8proc -lmicrohttpd -lm -pthread"
V=${V:-"base:-DAMX_BT1=0 bt1:-DAMX_BT1=1 kb16:-DAMX_BT1=1+-DAMX_KB=16 kb16p8:-DAMX_BT1=1+-DAMX_KB=16+-DAMX_PG=8 mb512:-DAMX_BT1=1+-DMB=512"}
for v in $V; do n=${v%%:*}; f=$(echo ${v#*:} | tr + " ")
  ( taskset -c 4-7 gcc $CF $f -c src/engine/cpu/gemm_amx.c -o /tmp/g_$n.o && taskset -c 4-7 gcc $CF tools/kbench.c /tmp/g_$n.o build/libtandem.a $LL -o /tmp/kb_$n || echo "build $n failed" >> $A ) &
done
while [ ! -f /tmp/tb/ready ]; do sleep 1; done; wait
st pp512
for round in 1 2 3; do for p in def h6 def h6; do
  TANDEM_PROFILE=1 timeout 60 build/tandem bench /tmp/tb/q-$p.tdm -t 2 --tests pp512 --reps 3 > /tmp/pp.json 2> /tmp/pp.err &
  pid=$!; sleep 4; hp=$(grep AnonHugePages /proc/$pid/smaps_rollup 2>/dev/null | tr -s ' '); wait $pid
  echo "pp $round $p | $(grep -o '"tokens_per_s": [0-9.]*' /tmp/pp.json | tr '\n' ' ') | $hp | $(grep 'profile: prefill' /tmp/pp.err | head -2 | tr '\n' ' ')" >> $A
done; done
for p in def h6; do echo "nohuge $p $(TANDEM_HUGEPAGES=0 timeout 60 build/tandem bench /tmp/tb/q-$p.tdm -t 2 --tests pp512 --reps 3 2>/dev/null | grep -o '"tokens_per_s": [0-9.]*' | tr '\n' ' ')" >> $A; done
st amx
SH="int8_512_1152_896 int8_512_9728_896 int8_512_2048_2048 int8_512_8192_2048 int8_512_2048_8192 bf16_512_2048_2048"
for round in 1 2 3; do
  for s in $SH; do s=$(echo $s | tr _ " ")
    for v in $V; do n=${v%%:*}
      [ $(( $(date +%s) - T0 )) -gt 540 ] && break 3
      o=$(/tmp/kb_$n -t 2 -s 0.3 -p 3 -v amx gemm $s 2>&1)
      echo "$o" | grep -q INVALID && echo "INVALID $n $s: $(echo "$o" | grep INVALID)" >> $A
      r=$(echo "$o" | grep -o 'median [0-9.]* GFLOP/s, median [0-9.]*%' | grep -o '[0-9.]*%' )
      echo "$round|$s|$n|$r" >> $A
    done
  done
done
python3 - $A "$V" <<'PY' | tee -a $A
import sys, statistics, collections
d = collections.defaultdict(list)
names = [v.split(':')[0] for v in sys.argv[2].split()]
for l in open(sys.argv[1]):
    p = l.strip().split('|')
    if len(p) == 4 and p[3]:
        d[(p[1], p[2])].append(float(p[3].rstrip('%')))
for s in sorted({k[0] for k in d}):
    print(s, ' '.join(f"{v}:{statistics.median(d[(s, v)]):.1f}%" + str([round(x) for x in d[(s, v)]]) for v in names if d[(s, v)]))
PY
st done
