#!/bin/bash
# session 11, the shipped build: (1) AMX GEMM, B tiles by TILELOADDT1 (ships) vs TILELOADD, paired with
# the tile peak, interleaved; (2) Qwen and Llama beside llama.cpp, pp512 + tg128.
# Run: bash .devdeps/run42.sh (carry .devdeps)
R=$(pwd); OUT=${OUT:-/tmp/out}; mkdir -p $OUT; A=$OUT/all42.txt
export LD_LIBRARY_PATH=$R/.devdeps/lib
T0=$(date +%s); st() { echo "== $1 at $(( $(date +%s) - T0 )) s" | tee -a $A; }
st build
P=.devdeps/peer; mkdir -p /tmp/gg /tmp/tb
for m in qwen05b llama1b; do
 ( PYTHONPATH=$P/gguf-py taskset -c 8-15 timeout 300 python3 $P/make_synth_gguf.py /tmp/gg $m > /tmp/gguf_$m.log 2>&1
   LD_LIBRARY_PATH=$P/lib LLB_BACKEND_DIR=$P/lib taskset -c 8-15 $P/llbench quantize /tmp/gg/$m-bf16.gguf /tmp/gg/$m-q4_0.gguf q4_0 8 >> /tmp/gguf_$m.log 2>&1; touch /tmp/gg/$m.ok ) &
done
taskset -c 0-7 sh .devdeps/build.sh build/tandem build/libtandem.a > /tmp/build.log 2>&1 || { tail -40 /tmp/build.log; exit 1; }
CF="-O2 -std=c11 -D_GNU_SOURCE -Isrc -Iinclude -I.devdeps/include -I.devdeps/include/cjson -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512bf16 -mavx512vnni -mamx-tile -mamx-bf16 -mamx-int8 -mfma -mf16c"
LL="-L.devdeps/lib -lcjson -lpcre2-8 -lutf8proc -lmicrohttpd -lm -pthread"
for v in ld:-DAMX_BT1=0 dt1:-DAMX_BT1=1; do n=${v%%:*}; f=${v#*:}
  gcc $CF $f -c src/engine/cpu/gemm_amx.c -o /tmp/g_$n.o && gcc $CF tools/kbench.c /tmp/g_$n.o build/libtandem.a $LL -o /tmp/kb_$n || echo "build $n failed" >> $A
done
( taskset -c 8-15 build/tandem synth --like qwen2.5-0.5b -o /tmp/tb/q > /dev/null 2>> $A
  taskset -c 8-15 build/tandem convert /tmp/tb/q -o /tmp/tb/q.tdm --threads 8 > /dev/null 2>> $A
  taskset -c 8-15 build/tandem synth --like llama-3.2-1b -o /tmp/tb/l > /dev/null 2>> $A
  taskset -c 8-15 build/tandem convert /tmp/tb/l -o /tmp/tb/l.tdm --threads 8 > /dev/null 2>> $A ) &
st amx
SH="int8_512_1152_896 int8_512_9728_896 int8_512_2048_2048 int8_512_8192_2048 int8_512_2048_8192 bf16_512_2048_2048"
for round in 1 2 3; do for s in $SH; do s=$(echo $s | tr _ " "); for n in ld dt1; do
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
    print(s, ' '.join(f"{v}:{statistics.median(d[(s, v)]):.1f}%" + str([round(x, 1) for x in d[(s, v)]]) for v in ['ld', 'dt1'] if d[(s, v)]))
PY
st benches
wait
export LLB_BACKEND_DIR=$R/.devdeps/peer/lib LLB_MAX_FOREIGN=1000
for b in q:qwen05b:5 l:llama1b:3; do IFS=: read t g n <<< "$b"; st "bench $g"
  [ -f /tmp/gg/$g.ok ] || { echo "no gguf $g" >> $A; continue; }
  LD_LIBRARY_PATH="$R/.devdeps/lib:$R/.devdeps/peer/lib" timeout 170 build/tandem bench /tmp/tb/$t.tdm -t 2 --tests pp512,tg128 --reps $n --ceilings --peer llama.cpp --peer-model /tmp/gg/$g-q4_0.gguf --peer-bin $R/.devdeps/peer/llbench --md $OUT/x42-$g.md > $OUT/x42-$g.json 2>> /tmp/bench_$g.err
  grep -E "bench rep" /tmp/bench_$g.err >> $A; cat $OUT/x42-$g.md >> $A
done
st done
