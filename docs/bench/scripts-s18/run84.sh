#!/bin/bash
# session 18, run 84: the final code (gate|up in bf16) beside llama.cpp, Qwen and Llama in turn, up to
# four invocations, with the paired GEMM share.
. tools/devbench.sh; db_init 84
db_st build
db_peer_models qwen05b llama1b
db_build build/kbench build/tandem || exit 1
db_packages qwen2.5-0.5b:q llama-3.2-1b:l
db_wait_models
db_st beside
i=0
for m in q:qwen05b l:llama1b q:qwen05b l:llama1b; do i=$((i+1))
  db_left 330 || break
  db_beside ${m%%:*} ${m##*:} pp512,tg128 $i
  grep -h "GEMM kernels\|of the read bandwidth" $OUT/r84-${m%%:*}-$i.md | sed "s/^/# $i ${m%%:*} /" >> $A
  python3 -c "import json;d=json.load(open('$OUT/r84-${m%%:*}-$i.json'));print('# $i ${m%%:*} ceilings', json.dumps(d['ceilings']))" >> $A 2>&1
  rm -f $OUT/r84-${m%%:*}-$i.json
done
grep -h "beside\|medians" $A
db_st done
