#!/bin/bash
# session 18 (prepared in session 17), run 81: the shipped code beside llama.cpp, Qwen and Llama in
# turn, four invocations; --ceilings now gives each pp512 rep the AMX peak measured right before and
# after it and the rep's GEMM share (JSON gemm_share, a markdown line): issue 5's figure, paired.
. tools/devbench.sh; db_init 81
db_st build
db_peer_models qwen05b llama1b
db_build build/tandem || exit 1
db_packages qwen2.5-0.5b:q llama-3.2-1b:l
db_wait_models
db_st bench
i=0
for m in q:qwen05b l:llama1b q:qwen05b l:llama1b; do i=$((i+1))
  db_left 480 || break
  db_beside ${m%%:*} ${m##*:} pp512,tg128 $i
  grep -h "GEMM kernels\|of the read bandwidth" $OUT/r81-${m%%:*}-$i.md | sed "s/^/# $i ${m%%:*} /" >> $A
  python3 -c "import json;d=json.load(open('$OUT/r81-${m%%:*}-$i.json'));print('# $i ${m%%:*} ceilings', json.dumps(d['ceilings']))" >> $A 2>&1
  rm -f $OUT/r81-${m%%:*}-$i.json
done
grep -h "beside" $A
db_st done
