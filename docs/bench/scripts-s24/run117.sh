#!/bin/bash
# session 24, run 117: the shipped code (HEAD of session 24: model-description switches added, the AMX and
# decode kernels as in session 23) beside llama.cpp, two invocations a model (Qwen, Llama, Qwen, Llama).
. tools/devbench.sh; db_init 117
db_st build
taskset -pc 6-15 $$ > /dev/null; db_peer_models qwen05b llama1b; taskset -pc 0-15 $$ > /dev/null
db_build build/tandem || exit 1
db_packages qwen2.5-0.5b:q llama-3.2-1b:l
db_wait_models
db_st beside
i=0
for m in q:qwen05b l:llama1b q:qwen05b l:llama1b; do i=$((i+1))
  db_left 500 || break
  db_beside ${m%%:*} ${m##*:} pp512,tg128 $i
  grep -h "GEMM kernels\|of the read bandwidth" $OUT/r117-${m%%:*}-$i.md | sed "s/^/# $i ${m%%:*} /" >> $A
  rm -f $OUT/r117-${m%%:*}-$i.json
done
grep -h "beside\|^# [0-9] [ql]" $A
db_st done
