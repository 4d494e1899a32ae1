#!/bin/bash
# session 37, run 144 (h200-host Xeon): both shapes beside llama.cpp (pp512, tg128, 3 reps, --ceilings),
# now with each tg128 rep set against the read bandwidth measured right before and after it
# (read_share), two rounds as time allows; then the kernel and engine tests on the real tiles
. tools/devbench.sh; db_init 144
db_peer_models qwen05b llama1b
db_st build
db_build build/tandem build/tests/test_kernels build/tests/test_attn build/tests/test_engine build/tests/test_template || exit 1
db_packages qwen2.5-0.5b:q llama-3.2-1b:l
db_wait_models
for r in 1 2; do
    db_st "beside round $r"
    db_left 330 && db_beside q qwen05b pp512,tg128 $r
    db_left 400 && db_beside l llama1b pp512,tg128 $r
    grep -hE "read bandwidth measured right|GEMM kernels ran" $OUT/r144-?-$r.md >> $A 2>/dev/null
done
db_st tests
for t in test_kernels test_attn test_template test_engine; do
    db_left 540 || break
    timeout $(( 560 - ($(date +%s) - T0) )) build/tests/$t > /tmp/$t.log 2>&1; echo "$t rc=$?: $(tail -1 /tmp/$t.log)" >> $A
    grep -m5 -i "fail" /tmp/$t.log | grep -v " 0 failed" >> $A
done
db_st done
cat $A
