#!/bin/bash
# session 20, run 93: (1) test_kernels on the tiles; (2) kbench-ab: AMX_MB_WIDE (512-row tasks where A fits
# L2 and N >= 4096) on the shapes it changes and two it leaves (A/A controls); (3) both models beside llama.cpp
# (the session's default: q|k|v, o, down in bf16); (4) pp512 with the paired share, the shipped build
# against one built with -DAMX_MB_WIDE=1, interleaved.
. tools/devbench.sh; db_init 93
db_st build
db_peer_models qwen05b llama1b
db_build build/kbench build/tandem build/tests/test_kernels || exit 1
timeout 120 build/tests/test_kernels 2>&1 | grep -iE "passed|fail" | tail -3 >> $A
db_packages qwen2.5-0.5b:q llama-3.2-1b:l
db_st ab
DB_AB_P=40 DB_AB_S=0.05 db_ab mbwide "-DAMX_MB_WIDE=1" 1 "9728 896" "16384 2048" "8192 2048" "2048 8192" "1152 896"
grep -E "^r1 |INVALID" $A
db_wait_models
db_st beside
i=0
for m in q:qwen05b l:llama1b; do i=$((i+1))
  db_left 330 || break
  db_beside ${m%%:*} ${m##*:} pp512,tg128 $i
  grep -h "GEMM kernels\|of the read bandwidth" $OUT/r93-${m%%:*}-$i.md | sed "s/^/# $i ${m%%:*} /" >> $A
  rm -f $OUT/r93-${m%%:*}-$i.json
done
grep -h "beside" $A
db_st wide
mkdir -p /tmp/bw && db_build BUILD=/tmp/bw CFLAGS="-O2 -g -DAMX_MB_WIDE=1" /tmp/bw/tandem || echo "wide build failed" >> $A
for r in 1 2; do for m in q l; do for b in build /tmp/bw; do
  db_left 540 || break 3
  timeout 60 $b/tandem bench /tmp/tb/$m.tdm -t 2 --tests pp512 --reps 3 --ceilings --md /tmp/g.md > /tmp/g.json 2>/dev/null
  echo "r$r ${b##*/} $m: $(grep -E '^\| pp512' /tmp/g.md | cut -d'|' -f4) $(grep -o 'GEMM kernels ran [0-9.]* TOP/s = \*\*[0-9]*%' /tmp/g.md) $(grep -o 'range [0-9-]*%' /tmp/g.md | head -1)" >> $A
done; done; done
grep -E "^r[0-9] (build|bw) " $A
db_st done
