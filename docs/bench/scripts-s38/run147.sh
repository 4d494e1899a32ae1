#!/bin/bash
# session 38, run 147 (h200-host Xeon): the session's final code. Both shapes beside llama.cpp
# (pp512, tg128, 3 reps, --ceilings; the same engines and kernels as session 37, the runtime's new
# paths off in bench), two rounds as time allows; then the new tests on this machine's AVX-512:
# the GEMV choice kept per machine (test_tunecache), JSON mode's automaton and masks (test_json_gate,
# with the two conformance tokenizers it reads carried in tmp/tok.tar.xz), the scheduler.
. tools/devbench.sh; db_init 147
mkdir -p /tmp/sh && tar xJf tmp/tok.tar.xz -C /tmp/sh && export TM_SHARED=/tmp/sh/shared
db_peer_models qwen05b llama1b
db_st build
db_build build/tandem build/tests/test_tunecache build/tests/test_json_gate build/tests/test_sched || exit 1
db_packages qwen2.5-0.5b:q llama-3.2-1b:l
db_wait_models
for r in 1 2; do
    db_st "beside round $r"
    db_left 330 && db_beside q qwen05b pp512,tg128 $r
    db_left 400 && db_beside l llama1b pp512,tg128 $r
    grep -hE "read bandwidth measured right|GEMM kernels ran" $OUT/r147-?-$r.md >> $A 2>/dev/null
done
db_st tests
for t in test_tunecache test_json_gate test_sched; do
    db_left 540 || break
    TANDEM_GEMV=avx512 timeout $(( 560 - ($(date +%s) - T0) )) build/tests/$t > /tmp/$t.log 2>&1
    echo "$t rc=$?: $(tail -1 /tmp/$t.log)" >> $A
    grep -m5 "CHECK failed" /tmp/$t.log >> $A
done
db_st done
cat $A
