#!/bin/bash
# session 23, run 114: the engine tests on the real tiles with AMX_PRELOAD=1 shipped (the conformance
# models carried in .devdeps/conf/conformance/models, TM_SHARED pointing there), test_attn; then, as
# time allows, the shipped code beside llama.cpp once more (Qwen, Llama).
. tools/devbench.sh; db_init 114
db_st build
taskset -pc 6-15 $$ > /dev/null; db_peer_models qwen05b llama1b; taskset -pc 0-15 $$ > /dev/null
db_build build/tandem build/tests/test_engine_conf build/tests/test_engine build/tests/test_attn || exit 1
db_st conf
(export TANDEM_GEMV=avx512 TM_SHARED=$R/.devdeps/conf
 timeout 150 build/tests/test_engine_conf 2>&1 | grep -E "cpu-amx|SKIP|CHECK|FAIL|passed" >> $A
 db_st engine
 timeout 120 build/tests/test_engine 2>&1 | grep -E "cpu-amx|SKIP|CHECK|FAIL|passed" >> $A
 db_st attn
 timeout 40 build/tests/test_attn 2>&1 | grep -E "variant|FAIL|passed" >> $A)
db_packages qwen2.5-0.5b:q llama-3.2-1b:l
db_wait_models
db_st beside
i=4
for m in q:qwen05b l:llama1b; do i=$((i+1))
  db_left 330 || break
  db_beside ${m%%:*} ${m##*:} pp512,tg128 $i
  grep -h "GEMM kernels\|of the read bandwidth" $OUT/r114-${m%%:*}-$i.md | sed "s/^/# $i ${m%%:*} /" >> $A
  rm -f $OUT/r114-${m%%:*}-$i.json
done
db_st done
grep -v "^bench " $A
