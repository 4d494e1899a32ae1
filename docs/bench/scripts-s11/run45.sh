#!/bin/bash
# session 11: the AMX GEMM's non-temporal output (from 8 MB; Qwen's gate/up writes 20 MB per layer, which
# the activation pass reads right after) against plain stores, Qwen pp512, interleaved, with the profile.
# Run: bash .devdeps/run45.sh (carry .devdeps)
R=$(pwd); OUT=${OUT:-/tmp/out}; mkdir -p $OUT; A=$OUT/all45.txt
export LD_LIBRARY_PATH=$R/.devdeps/lib
T0=$(date +%s); st() { echo "== $1 at $(( $(date +%s) - T0 )) s" | tee -a $A; }
lscpu | grep -iE "model name|L2|L3" >> $A
st build
sh .devdeps/build.sh build/tandem build/libtandem.a > /tmp/build.log 2>&1 || { tail -40 /tmp/build.log; exit 1; }
CB="-O2 -g -std=c11 -D_GNU_SOURCE -Isrc -Iinclude -I.devdeps/include -I.devdeps/include/cjson -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512vnni -mavx512bf16 -mfma -mf16c -mamx-tile -mamx-int8 -mamx-bf16"
LL="-L.devdeps/lib -lcjson -lpcre2-8 -lutf8proc -lmicrohttpd -lm -pthread"
gcc $CB -DAMX_NT_BYTES=0xffffffffu -c src/engine/cpu/gemm_amx.c -o /tmp/g_nont.o && gcc -o /tmp/td_plain build/obj/src/cli/*.o /tmp/g_nont.o build/libtandem.a $LL 2>> $A
cp build/tandem /tmp/td_nt
mkdir -p /tmp/tb; build/tandem synth --like qwen2.5-0.5b -o /tmp/tb/q > /dev/null; build/tandem convert /tmp/tb/q -o /tmp/tb/q.tdm --threads 16 > /dev/null
st ab
pp() { TANDEM_PROFILE=1 timeout 40 "$@" bench /tmp/tb/q.tdm -t 2 --tests pp512 --reps 2 2>/tmp/pe.txt | grep -o '"tokens_per_s": [0-9.]*' | grep -o '[0-9.]*$' | tr '\n' ' '; grep -o 'prefill: .*' /tmp/pe.txt | head -1; }
for round in $(seq 1 14); do
  [ $(( $(date +%s) - T0 )) -gt 170 ] && break
  echo "ab $round | nt $(pp /tmp/td_nt) | plain $(pp /tmp/td_plain)" >> $A
done
python3 - $A <<'PY' | tee -a $A
import sys, re, statistics as st, collections
tp = collections.defaultdict(list); act = collections.defaultdict(list); mm = collections.defaultdict(list)
for l in open(sys.argv[1]):
    if not l.startswith('ab '): continue
    for part in l.split('|')[1:]:
        m = re.match(r'\s*(\w+) ([0-9.]+) .*prefill: \d+ calls, ([0-9.]+) s: matmul ([0-9.]+)%.*activation\+prepare ([0-9.]+)%', part)
        if not m: continue
        k = m.group(1); tot = float(m.group(3))
        tp[k].append(float(m.group(2))); mm[k].append(tot * float(m.group(4)) / 100); act[k].append(tot * float(m.group(5)) / 100)
for k in tp:
    print(f"{k}: pp512 median {st.median(tp[k]):.0f} t/s {sorted(round(x) for x in tp[k])}; matmul {st.median(mm[k]):.3f} s, activation+prepare {st.median(act[k]):.3f} s (per profile, medians)")
PY
st done
