#!/bin/bash
# session 36, run 143 (h200-host Xeon): the session's final GEMV (x in registers a window per call)
# against session 35's gemv_q4.inc (.devdeps/gemv_q4_s35.inc): tg128 of both shapes interleaved,
# kbench in cache; then both shapes beside llama.cpp (pp512, tg128, 3 reps, ceilings)
. tools/devbench.sh; db_init 143
db_peer_models qwen05b llama1b
db_st build
db_build build/tandem build/kbench || exit 1
mkdir -p /tmp/old && cp -r src include tools tests Makefile /tmp/old/ && ln -s $R/.devdeps /tmp/old/.devdeps
cp .devdeps/gemv_q4_s35.inc /tmp/old/src/engine/cpu/gemv_q4.inc
(cd /tmp/old && sh .devdeps/build.sh build/tandem build/kbench > /tmp/b-old.log 2>&1) & P1=$!
db_packages qwen2.5-0.5b:q llama-3.2-1b:l
wait $P1
db_st kbench
for r in 1 2 3; do for v in old new; do
    b=$R/build/kbench; [ $v = old ] && b=/tmp/old/build/kbench
    for s in "1152 896" "2048 2048" "2048 8192"; do
        echo "r$r $v warm1 $s: $(db_kbench $b -t 1 -s 0.3 -m 1 -v avx512 gemv int4g64 $s 1)" >> $A
    done
done; done
db_st tg128
for r in 1 2 3; do for m in q l; do for v in old new; do
    db_left 250 || break
    b=$R/build/tandem; [ $v = old ] && b=/tmp/old/build/tandem
    echo "r$r $m $v tg128: $($b bench /tmp/tb/$m.tdm -t 2 --tests tg128 --reps 3 2>/dev/null | grep -oE '"tokens_per_s": [0-9.]+' | grep -oE '[0-9.]+$')" >> $A
done; done; done
db_wait_models
db_st beside
db_beside q qwen05b pp512,tg128 1
db_left 420 && db_beside l llama1b pp512,tg128 1
db_st done
cat $A
