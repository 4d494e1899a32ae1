#!/bin/bash
# session 25, run 125: the engine tests on the real tiles with the final code (GPT-J, Cohere, OPT, Falcon added) (the conformance
# models carried in .devdeps/conf/conformance/models, TM_SHARED pointing there), and test_kernels.
. tools/devbench.sh; db_init 125
db_st build
db_build build/tandem build/tests/test_engine_conf build/tests/test_engine build/tests/test_kernels build/tests/test_conformance || exit 1
db_st conf
(export TANDEM_GEMV=avx512 TM_SHARED=$R/.devdeps/conf
 timeout 150 build/tests/test_engine_conf > $OUT/r125-conf.txt 2>&1; tail -1 $OUT/r125-conf.txt >> $A
 grep -E "^cpu-amx," $OUT/r125-conf.txt | grep -E "gptj|cohere|opt|falcon|all [0-9]+ fixtures" >> $A
 db_st engine
 timeout 150 build/tests/test_engine > $OUT/r125-engine.txt 2>&1; grep -E "^cpu-amx,|CHECK|passed" $OUT/r125-engine.txt >> $A
 db_st kernels
 timeout 60 build/tests/test_kernels 2>&1 | grep -E "FAIL|passed" >> $A
 timeout 100 build/tests/test_conformance 2>&1 | grep -E "FAIL|passed" >> $A)
db_st done
grep -v "^bench " $A
