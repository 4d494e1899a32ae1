#!/bin/bash
# session 23, run 113: the shipped code (AMX_PRELOAD=1) beside llama.cpp, two invocations a model
# (Qwen, Llama, Qwen, Llama); before them, kbench-ab of AMX_EPI_MEASURE=9 (y's stores to an L1 sink)
# and 10 (that and no y prefetch: no y traffic) against the shipped GEMM, and a decode profile.
. tools/devbench.sh; db_init 113
db_st build
taskset -pc 6-15 $$ > /dev/null; db_peer_models qwen05b llama1b; taskset -pc 0-15 $$ > /dev/null
db_build build/tandem build/kbench || exit 1
db_packages qwen2.5-0.5b:q llama-3.2-1b:l
db_st ab
export DB_AB_P=40 DB_AB_S=0.05 DB_AB_Y=1
db_ab epi10 "-DAMX_EPI_MEASURE=10" 1 "1152 896" "9728 896" "896 4864"
db_ab epi9 "-DAMX_EPI_MEASURE=9" 1 "1152 896" "9728 896" "896 4864"
grep -E "^r1 |INVALID|^# r1" $A
db_wait_models
db_st beside
i=0
for m in q:qwen05b l:llama1b q:qwen05b l:llama1b; do i=$((i+1))
  db_left 470 || break
  db_beside ${m%%:*} ${m##*:} pp512,tg128 $i
  grep -h "GEMM kernels\|of the read bandwidth" $OUT/r113-${m%%:*}-$i.md | sed "s/^/# $i ${m%%:*} /" >> $A
  rm -f $OUT/r113-${m%%:*}-$i.json
done
grep -h "beside\|^# [0-9] [ql]" $A
db_st profile
db_left 520 && TANDEM_PROFILE=warm build/tandem bench /tmp/tb/q.tdm -t 2 --tests tg128 --reps 3 2>&1 >/dev/null | grep -E "decode" | sed 's/^/dprof /' >> $A
grep dprof $A
db_st done
