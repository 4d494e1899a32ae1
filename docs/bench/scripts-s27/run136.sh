#!/bin/bash
# session 27, run 136: the final code (MLA absorbed) on the real tiles:
# test_kernels, test_conformance (five of the seven conformance models carried in .devdeps/conflite: the 64 MiB carry limit leaves out gemma2 and mistral,
# TM_SHARED pointing there)
. tools/devbench.sh; db_init 136
db_st build
db_build build/tandem build/tests/test_engine_conf build/tests/test_engine build/tests/test_kernels build/tests/test_conformance build/tests/test_attn || exit 1
(export TANDEM_GEMV=avx512 TM_SHARED=$R/.devdeps/conflite
 db_st attn
 timeout 120 build/tests/test_attn 2>&1 | grep -E "FAIL|CHECK|variant|passed" >> $A
 db_st conf
 timeout 150 build/tests/test_engine_conf > $OUT/r136-conf.txt 2>&1; tail -1 $OUT/r136-conf.txt >> $A
 grep -E "^cpu-amx," $OUT/r136-conf.txt | grep -E "gpt_oss|deepseek|all [0-9]+ fixtures" >> $A
 db_st engine
 timeout 200 build/tests/test_engine > $OUT/r136-engine.txt 2>&1; grep -E "^cpu-amx,|CHECK|passed" $OUT/r136-engine.txt >> $A
 db_st kernels
 timeout 60 build/tests/test_kernels 2>&1 | grep -E "FAIL|passed" >> $A
 timeout 100 build/tests/test_conformance 2>&1 | grep -E "FAIL|passed" >> $A)
db_st done
grep -v "^bench " $A
