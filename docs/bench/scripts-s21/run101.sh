#!/bin/bash
# session 21, run 101: (1) the GEMM split into even units of 4 panels (tm_kgemm_run) against
# session 20's (a measurement build of gemm_amx.c, -DAMX_SPLIT_OLD=1, as the alternative: the
# ratio is old / new), kbench-ab with both builds storing y in bf16, 40 rounds of 0.05 s;
# (2) the shipped code beside llama.cpp, once a model (the peer's GGUFs made on CPUs 6-15).
. tools/devbench.sh; db_init 101
db_st build
taskset -pc 6-15 $$ > /dev/null; db_peer_models qwen05b llama1b; taskset -pc 0-15 $$ > /dev/null
db_build build/kbench build/tandem || exit 1
db_packages qwen2.5-0.5b:q llama-3.2-1b:l
db_st ab
export DB_AB_P=40 DB_AB_S=0.05 DB_AB_Y=1
db_ab splitold "-DAMX_SPLIT_OLD=1" 1 "9728 896" "1152 896" "16384 2048" "896 4864"
o=$(/tmp/kab-splitold -a 1 -Y 1 -t 2 -s 0.05 -p 40 -m 128 -v amx gemm int8 64 1152 896 2>&1)
echo "r1 splitold 64 1152 896: $(echo "$o" | grep -oE 'build first\): median [0-9.]+x' | grep -oE '[0-9.]+' | head -1) x" >> $A
grep -E "^r1 |INVALID" $A
db_wait_models
db_st beside
i=0
for m in q:qwen05b l:llama1b; do i=$((i+1))
  db_left 560 || break
  db_beside ${m%%:*} ${m##*:} pp512,tg128 $i
  grep -h "GEMM kernels\|of the read bandwidth" $OUT/r101-${m%%:*}-$i.md | sed "s/^/# $i ${m%%:*} /" >> $A
  rm -f $OUT/r101-${m%%:*}-$i.json
done
grep -h "beside\|^# [0-9] [ql]\|bench rep" $A
db_st done
