#!/bin/bash
# session 20 (prepared in session 19), run 91: (1) the GEMM side of storing y in bf16, per shape, in one
# process (kbench -Y 1: gemm_q8 against gemm_bf16y of the same build, 40 rounds of 0.05 s); (2) the
# engine with TANDEM_Y_BF16=1 (q|k|v, o and down in bf16) against the default, pp512 with the paired
# share, interleaved, Qwen and Llama; (3) both models beside llama.cpp.
. tools/devbench.sh; db_init 91
db_st build
db_peer_models qwen05b llama1b
db_build build/kbench build/tandem build/tests/test_kernels || exit 1
timeout 120 build/tests/test_kernels 2>&1 | grep -iE "passed|fail" | tail -3 >> $A
db_packages qwen2.5-0.5b:q llama-3.2-1b:l
db_st y16
for s in "1152 896" "896 896" "896 4864" "3072 2048" "2048 2048" "2048 8192"; do
  o=$(build/kbench -Y 1 -t 2 -s 0.05 -p 40 -m 128 -v amx gemm int8 512 $s 2>&1)
  echo "r1 y16 512 $s: $(echo "$o" | grep -oE 'build first\): median [0-9.]+x' | grep -oE '[0-9.]+' | head -1) x" >> $A
  echo "# y16 512 $s: $(echo "$o" | grep -oE 'median [0-9.]+% of the peak beside it' | head -1); bf16 y $(echo "$o" | grep -oE 'alternative build: median [0-9.]+%' | head -1)" >> $A
done
db_st engine
for r in 1 2 3; do for m in q l; do for yb in 0 1; do
  db_left 330 || break 3
  TANDEM_Y_BF16=$yb timeout 60 build/tandem bench /tmp/tb/$m.tdm -t 2 --tests pp512 --reps 3 --ceilings --md /tmp/g.md > /tmp/g.json 2>/dev/null
  echo "r$r yb$yb $m: $(grep -E '^\| pp512' /tmp/g.md | cut -d'|' -f4) $(grep -o 'GEMM kernels ran [0-9.]* TOP/s = \*\*[0-9]*%' /tmp/g.md)" >> $A
done; done; done
grep -E "^r[0-9] (y16|yb)|^# y16" $A
db_wait_models
db_st beside
i=0
for m in q:qwen05b l:llama1b; do i=$((i+1))
  db_left 480 || break
  db_beside ${m%%:*} ${m##*:} pp512,tg128 $i
  grep -h "GEMM kernels\|of the read bandwidth" $OUT/r91-${m%%:*}-$i.md | sed "s/^/# $i ${m%%:*} /" >> $A
  rm -f $OUT/r91-${m%%:*}-$i.json
done
grep -h "beside" $A
db_st done
