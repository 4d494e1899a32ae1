#!/bin/bash
# session 20, run 94 (the session's final code: q|k|v, o, down in bf16 and 512-row tasks for wide GEMMs by
# default): test_kernels on the tiles, then both models beside llama.cpp, twice each, interleaved.
. tools/devbench.sh; db_init 94
db_st build
db_peer_models qwen05b llama1b
db_build build/tandem build/tests/test_kernels || exit 1
timeout 120 build/tests/test_kernels 2>&1 | grep -iE "passed|fail" | tail -3 >> $A
db_packages qwen2.5-0.5b:q llama-3.2-1b:l
db_wait_models
db_st beside
i=0
for m in q:qwen05b l:llama1b q:qwen05b l:llama1b; do i=$((i+1))
  db_left 400 || break
  db_beside ${m%%:*} ${m##*:} pp512,tg128 $i
  grep -h "GEMM kernels\|of the read bandwidth" $OUT/r94-${m%%:*}-$i.md | sed "s/^/# $i ${m%%:*} /" >> $A
  rm -f $OUT/r94-${m%%:*}-$i.json
done
grep -h "beside" $A
db_st done
