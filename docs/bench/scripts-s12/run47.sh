#!/bin/bash
# session 12, run 47: the AMX prefill attention software-pipelined (the tiles compute group i+1's S^T
# while the vector units run group i's softmax) against HEAD's kernel, kbench attnp interleaved, plus
# a measurement build without the lo terms (ATTN_LO=0); then Qwen pp512 base vs new with the profile.
R=$(pwd); OUT=${OUT:-/tmp/out}; mkdir -p $OUT; A=$OUT/all47.txt
export LD_LIBRARY_PATH=$R/.devdeps/lib
T0=$(date +%s); st() { echo "== $1 at $(( $(date +%s) - T0 )) s" | tee -a $A; }
lscpu | grep -iE "model name" >> $A
st build
sh .devdeps/build.sh build/tandem build/libtandem.a build/kbench build/tests/test_kernels > /tmp/build.log 2>&1 || { tail -40 /tmp/build.log | tee -a $A; exit 1; }
CB="-O2 -g -std=c11 -D_GNU_SOURCE -Isrc -Iinclude -Ibuild/gen -I.devdeps/include -I.devdeps/include/cjson -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512vnni -mavx512bf16 -mfma -mf16c -mamx-tile -mamx-int8 -mamx-bf16"
LL="-L.devdeps/lib -lcjson -lpcre2-8 -lutf8proc -lmicrohttpd -lm -pthread"
cp .devdeps/s12base/attn_amx.c /tmp/attn_base.c
gcc $CB -c /tmp/attn_base.c -o /tmp/attn_base.o && gcc $CB -DATTN_LO=0 -c src/engine/cpu/attn_amx.c -o /tmp/attn_lo0.o || exit 1
gcc $CB tools/kbench.c /tmp/attn_base.o build/libtandem.a $LL -o /tmp/kb_base && gcc $CB tools/kbench.c /tmp/attn_lo0.o build/libtandem.a $LL -o /tmp/kb_lo0 && cp build/kbench /tmp/kb_new
gcc -o /tmp/td_base build/obj/src/cli/*.o /tmp/attn_base.o build/libtandem.a $LL && cp build/tandem /tmp/td_new
st test
timeout 100 build/tests/test_kernels 2>&1 | grep -iE "amx|passed|fail" | tail -5 >> $A
mkdir -p /tmp/tb; build/tandem synth --like qwen2.5-0.5b -o /tmp/tb/q > /dev/null; build/tandem convert /tmp/tb/q -o /tmp/tb/q.tdm --threads 12 > /dev/null 2>> $A
st attnp
for round in 1 2 3 4; do
  for s in "512 14 2 64" "512 32 8 64" "512 14 2 64 3584"; do
    for v in base new lo0; do echo "r$round $v $s: $(/tmp/kb_$v -t 2 -s 0.4 -v amx attnp $s 2>&1 | grep -o 'max rel err.*')" >> $A; done
  done
done
python3 - $A <<'PY' | tee -a $A
import sys, re, statistics as st, collections
d = collections.defaultdict(list)
for l in open(sys.argv[1]):
    m = re.match(r'r\d (\w+) ([0-9 ]+): .* ([0-9.]+) GFLOP/s', l)
    if m: d[(m.group(2).strip(), m.group(1))].append(float(m.group(3)))
for k in sorted(d): print(f"attnp {k[0]:18s} {k[1]:5s} median {st.median(d[k]):6.1f} GFLOP/s {sorted(d[k])}")
PY
st pp512
pp() { TANDEM_PROFILE=1 timeout 40 "$@" bench /tmp/tb/q.tdm -t 2 --tests pp512 --reps 2 2>/tmp/pe.txt | grep -o '"tokens_per_s": [0-9.]*' | grep -o '[0-9.]*$' | tr '\n' ' '; grep -o 'prefill: .*' /tmp/pe.txt | head -1; }
for round in $(seq 1 10); do
  [ $(( $(date +%s) - T0 )) -gt 330 ] && break
  echo "ab $round | base $(pp /tmp/td_base) | new $(pp /tmp/td_new)" >> $A
done
python3 - $A <<'PY' | tee -a $A
import sys, re, statistics as st, collections
tp = collections.defaultdict(list); at = collections.defaultdict(list); tot = collections.defaultdict(list)
for l in open(sys.argv[1]):
    if not l.startswith('ab '): continue
    for part in l.split('|')[1:]:
        m = re.match(r'\s*(\w+) ([0-9.]+) .*prefill: \d+ calls, ([0-9.]+) s: matmul ([0-9.]+)%, attention ([0-9.]+)%', part)
        if not m: continue
        k = m.group(1); t = float(m.group(3))
        tp[k].append(float(m.group(2))); tot[k].append(t); at[k].append(t * float(m.group(5)) / 100)
for k in tp:
    print(f"{k}: pp512 median {st.median(tp[k]):.0f} t/s {sorted(round(x) for x in tp[k])}; prefill {st.median(tot[k]):.3f} s, attention {st.median(at[k]):.3f} s (medians, 3 prefills)")
PY
st done
