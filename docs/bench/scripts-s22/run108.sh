#!/bin/bash
# session 22, run 108: (1) kbench-ab, K chunks outside the panel groups where a task's C is at most
# 256 KB (-DAMX_KOUTER=2: Qwen's down projection) against the shipped build (ratios alternative /
# shipped speed), both builds storing y in bf16, 40 rounds of 0.05 s; Llama's down (the rule leaves
# it) as the control; (2) the shipped code (the spread epilogue) beside llama.cpp, once a model.
. tools/devbench.sh; db_init 108
db_st build
taskset -pc 6-15 $$ > /dev/null; db_peer_models qwen05b llama1b; taskset -pc 0-15 $$ > /dev/null
db_build build/kbench build/tandem || exit 1
db_packages qwen2.5-0.5b:q llama-3.2-1b:l
db_st ab
export DB_AB_P=40 DB_AB_S=0.05 DB_AB_Y=1
db_ab kouter2 "-DAMX_KOUTER=2" 1 "896 4864" "2048 8192"
db_ab kouter2 "-DAMX_KOUTER=2" 2 "896 4864"
db_ab kouter2 "-DAMX_KOUTER=2" 3 "896 4864"
grep -E "^r[123] |INVALID" $A
db_wait_models
db_st beside
i=0
for m in q:qwen05b l:llama1b; do i=$((i+1))
  db_left 560 || break
  db_beside ${m%%:*} ${m##*:} pp512,tg128 $i
  grep -h "GEMM kernels\|of the read bandwidth" $OUT/r108-${m%%:*}-$i.md | sed "s/^/# $i ${m%%:*} /" >> $A
  rm -f $OUT/r108-${m%%:*}-$i.json
done
grep -h "beside\|^# [0-9] [ql]\|bench rep" $A
db_st done
