#!/bin/bash
# session 37, run 145 (h200-host Xeon): the kernel and engine tests on the real tiles after the
# fused gate/up's bf16 bound was corrected, with the conformance models and templates carried
# (tmp/conf.tar.xz: ../shared/conformance/models and chat_templates; TM_SHARED points at them)
. tools/devbench.sh; db_init 145
mkdir -p /tmp/sh && tar xJf tmp/conf.tar.xz -C /tmp/sh && export TM_SHARED=/tmp/sh/shared
db_st build
db_build build/tests/test_kernels build/tests/test_engine build/tests/test_engine_conf build/tests/test_conformance \
    build/tests/test_template || exit 1
db_st tests
for t in test_kernels test_template test_conformance test_engine test_engine_conf; do
    db_left 520 || break
    timeout $(( 560 - ($(date +%s) - T0) )) build/tests/$t > /tmp/$t.log 2>&1; echo "$t rc=$?: $(tail -1 /tmp/$t.log)" >> $A
    grep -m8 -E "CHECK failed|bf16 y\[|cpu-amx.*(top-1|KL)" /tmp/$t.log >> $A
done
db_st done
cat $A
