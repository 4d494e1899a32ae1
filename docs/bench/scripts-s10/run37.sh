#!/bin/bash
# session 10: decode-attention prefetch variants on the Xeon (kbench attn, alternated), then perf on Qwen tg128/pp512.
R=$(pwd); OUT=${OUT:-/tmp/out}; mkdir -p $OUT; A=$OUT/all37.txt
export LD_LIBRARY_PATH=$R/.devdeps/lib
T0=$(date +%s); st() { echo "== $1 at $(( $(date +%s) - T0 )) s" | tee -a $A; }
mkdir -p /tmp/pp && tar -C /tmp/pp -xJf .devprof/perf.tar.xz
PERF() { LD_LIBRARY_PATH=/tmp/pp/lib:$R/.devdeps/lib /tmp/pp/perf "$@"; }
st build
sh .devdeps/build.sh build/tandem build/libtandem.a build/kbench > /tmp/build.log 2>&1 || { tail -40 /tmp/build.log; exit 1; }
CB="-O2 -std=c11 -D_GNU_SOURCE -Isrc -Iinclude -Ibuild/gen -I.devdeps/include -I.devdeps/include/cjson -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512vnni -mavx512bf16 -mfma -mf16c"
LL="-L.devdeps/lib -lcjson -lpcre2-8 -lutf8proc -lmicrohttpd -lm -pthread"
for v in "a 64 1" "b 128 1" "c 128 0" "d 64 0"; do set -- $v
  gcc $CB -DDC_PF_FAR=$2 -DDC_PF_NEAR=$3 -c src/engine/cpu/attn_avx512.c -o /tmp/at_$1.o && gcc -O2 -std=c11 -D_GNU_SOURCE -Isrc -Iinclude -Ibuild/gen -o /tmp/kb_$1 tools/kbench.c /tmp/at_$1.o build/libtandem.a $LL 2>> $A
done
st attn
for round in 1 2 3; do for c in "bf16 8192 1 32 8 64" "int8 8192 1 32 8 64"; do for v in a b c d; do
  echo "attn $round | $c | $v | $(/tmp/kb_$v -t 2 -s 0.4 -v avx512 attn $c 2>&1 | grep v2 | grep -o 'ok.*GB/s')" >> $A
done; done; done
if [ ! -f /tmp/tb/q.tdm ]; then mkdir -p /tmp/tb; build/tandem synth --like qwen2.5-0.5b -o /tmp/tb/q > /dev/null; build/tandem convert /tmp/tb/q -o /tmp/tb/q.tdm --threads 8 > /dev/null; fi
rep() { PERF report -i $1 --no-children --sort symbol 2>>$A | grep "%" | head -${2:-25} >> $A; }
st tg128
PERF record -e cpu-clock -F 4000 -o /tmp/p1.data -- build/tandem bench /tmp/tb/q.tdm -t 2 --tests tg128 --reps 3 > /dev/null 2>> $A; rep /tmp/p1.data
PERF annotate -i /tmp/p1.data --stdio -s q4_rows 2>/dev/null | sort -rn | head -25 >> $A
st pp512
PERF record -e cpu-clock -F 4000 -o /tmp/p2.data -- build/tandem bench /tmp/tb/q.tdm -t 2 --tests pp512 --reps 3 > /dev/null 2>> $A; rep /tmp/p2.data 30
st done
