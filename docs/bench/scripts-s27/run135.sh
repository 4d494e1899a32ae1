#!/bin/bash
# session 27, run 135: the deepseek_v2_group fixture regenerated (top-3 from one of two groups, so that the
# grouping shows); then the session's code on the real tiles: test_attn, test_engine_conf, test_engine,
# test_kernels, test_conformance (five of the seven conformance models carried in .devdeps/conflite: the 64 MiB carry limit leaves out gemma2 and mistral,
# TM_SHARED pointing there)
. tools/devbench.sh; db_init 135
(python3 tools/gen_refs.py /tmp/refs deepseek_v2_group 2>&1 | tail -8; cd /tmp && tar czf $OUT/r135-refs.tgz refs) >> $A 2>&1
db_st build
db_build build/tandem build/tests/test_engine_conf build/tests/test_engine build/tests/test_kernels build/tests/test_conformance build/tests/test_attn || exit 1
(export TANDEM_GEMV=avx512 TM_SHARED=$R/.devdeps/conflite
 db_st attn
 timeout 120 build/tests/test_attn 2>&1 | grep -E "FAIL|CHECK|variant|passed" >> $A
 db_st conf
 timeout 150 build/tests/test_engine_conf > $OUT/r135-conf.txt 2>&1; tail -1 $OUT/r135-conf.txt >> $A
 grep -E "^cpu-amx," $OUT/r135-conf.txt | grep -E "gpt_oss|deepseek|all [0-9]+ fixtures" >> $A
 db_st engine
 timeout 200 build/tests/test_engine > $OUT/r135-engine.txt 2>&1; grep -E "^cpu-amx,|CHECK|passed" $OUT/r135-engine.txt >> $A
 db_st kernels
 timeout 60 build/tests/test_kernels 2>&1 | grep -E "FAIL|passed" >> $A
 timeout 100 build/tests/test_conformance 2>&1 | grep -E "FAIL|passed" >> $A)
db_st done
grep -v "^bench " $A
