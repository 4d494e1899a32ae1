#!/bin/bash
# session 27, run 137: the session's final code (sinks in the attention kernels, the routing in model/moe_route.c) beside llama.cpp (Qwen, Llama; pp512, tg128, 2 threads), interleaved
. tools/devbench.sh; db_init 137
db_st build
taskset -pc 6-15 $$ > /dev/null; db_peer_models qwen05b llama1b; taskset -pc 0-15 $$ > /dev/null
db_build build/tandem || exit 1
db_packages qwen2.5-0.5b:q llama-3.2-1b:l
db_wait_models
db_st beside
i=0
for m in q:qwen05b l:llama1b q:qwen05b l:llama1b; do i=$((i+1))
  db_left 420 || break
  db_beside ${m%%:*} ${m##*:} pp512,tg128 $i
  grep -h "GEMM kernels\|of the read bandwidth" $OUT/r137-${m%%:*}-$i.md | sed "s/^/# $i ${m%%:*} /" >> $A
  rm -f $OUT/r137-${m%%:*}-$i.json
done
db_st done
grep -v "^bench " $A
