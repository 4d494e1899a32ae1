#!/bin/bash
# session 38, run 148 (h200-host Xeon): run 147's bench again on a fresh host, for more rounds of
# the same code: both shapes beside llama.cpp (pp512, tg128, 3 reps, --ceilings), up to three rounds
. tools/devbench.sh; db_init 148
db_peer_models qwen05b llama1b
db_st build
db_build build/tandem || exit 1
db_packages qwen2.5-0.5b:q llama-3.2-1b:l
db_wait_models
for r in 1 2 3; do
    db_st "beside round $r"
    db_left 420 && db_beside q qwen05b pp512,tg128 $r
    db_left 490 && db_beside l llama1b pp512,tg128 $r
    grep -hE "read bandwidth measured right|GEMM kernels ran" $OUT/r148-?-$r.md >> $A 2>/dev/null
done
db_st done
cat $A
