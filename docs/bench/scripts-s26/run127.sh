#!/bin/bash
# session 26, run 127: (1) transformers 5 fixtures for OLMo 3, Ministral, GLM, GLM-4, Cohere 2 and OLMoE,
# with their modeling sources; (2) the ALiBi code (BLOOM, MPT) and the other session-26 architectures on the
# real tiles: test_attn, test_engine_conf, test_engine, test_kernels, test_conformance (the conformance
# models carried in .devdeps/conf/conformance/models, TM_SHARED pointing there)
. tools/devbench.sh; db_init 127
db_st refs
(python3 tools/gen_refs.py /tmp/refs olmo3 ministral glm glm4 cohere2 olmoe > /tmp/refs.log 2>&1
 mkdir -p /tmp/src; T=$(python3 -c "import transformers, os; print(os.path.dirname(transformers.__file__))")
 for m in olmo3 ministral glm glm4 cohere2 olmoe; do cp $T/models/$m/modeling_$m.py $T/models/$m/configuration_$m.py /tmp/src/ 2>/dev/null; done
 cd /tmp && tar czf $OUT/r127-refs.tgz refs src refs.log) &
REFS=$!
db_st build
db_build build/tandem build/tests/test_engine_conf build/tests/test_engine build/tests/test_kernels build/tests/test_conformance build/tests/test_attn || exit 1
(export TANDEM_GEMV=avx512 TM_SHARED=$R/.devdeps/conf
 db_st attn
 timeout 120 build/tests/test_attn 2>&1 | grep -E "FAIL|CHECK|variant|passed" >> $A
 db_st conf
 timeout 150 build/tests/test_engine_conf > $OUT/r127-conf.txt 2>&1; tail -1 $OUT/r127-conf.txt >> $A
 grep -E "^cpu-amx," $OUT/r127-conf.txt | grep -E "bloom|mpt|bigcode|gpt_neo|olmo|all [0-9]+ fixtures" >> $A
 db_st engine
 timeout 200 build/tests/test_engine > $OUT/r127-engine.txt 2>&1; grep -E "^cpu-amx,|CHECK|passed" $OUT/r127-engine.txt >> $A
 db_st kernels
 timeout 60 build/tests/test_kernels 2>&1 | grep -E "FAIL|passed" >> $A
 timeout 100 build/tests/test_conformance 2>&1 | grep -E "FAIL|passed" >> $A)
wait $REFS
db_st done
grep -v "^bench " $A
