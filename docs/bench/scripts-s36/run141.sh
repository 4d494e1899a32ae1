#!/bin/bash
# session 36, run 141 (h200-host Xeon): the B = 1 GEMV changes (x in registers for K <= 1024, each
# task's first 8 KB requested at once) against session 35's gemv_q4.inc (carried as
# .devdeps/gemv_q4_s35.inc) and against the Q4_PAIRS=1 build: kbench GEMV lines and tg128 of both
# shapes, the three builds interleaved; then both shapes beside llama.cpp (pp512, tg128, ceilings)
. tools/devbench.sh; db_init 141
db_peer_models qwen05b llama1b
db_st build
db_build build/tandem build/kbench || exit 1
for v in old pairs; do
    mkdir -p /tmp/$v && cp -r src include tools tests Makefile /tmp/$v/ && ln -s $R/.devdeps /tmp/$v/.devdeps
done
cp .devdeps/gemv_q4_s35.inc /tmp/old/src/engine/cpu/gemv_q4.inc
(cd /tmp/old && sh .devdeps/build.sh build/tandem build/kbench > /tmp/b-old.log 2>&1) & P1=$!
(cd /tmp/pairs && sh .devdeps/build.sh CFLAGS="-O2 -g -DQ4_PAIRS=1" build/tandem build/kbench > /tmp/b-pairs.log 2>&1) & P2=$!
db_packages qwen2.5-0.5b:q llama-3.2-1b:l
wait $P1 $P2
ls -la /tmp/old/build/tandem /tmp/pairs/build/tandem >> $A 2>&1 || tail -5 /tmp/b-old.log /tmp/b-pairs.log >> $A
db_st kbench
for r in 1 2 3; do for v in old new pairs; do
    b=$R/build/kbench; [ $v != new ] && b=/tmp/$v/build/kbench
    for s in "1152 896" "896 896" "9728 896" "896 4864"; do
        echo "r$r $v gemv $s: $(db_kbench $b -t 2 -s 0.3 -v avx512 gemv int4g64 $s 1)" >> $A
    done
    echo "r$r $v gemv6 151936 896: $(db_kbench $b -t 2 -s 0.3 -v avx512 gemv int6g64 151936 896 1)" >> $A
    echo "r$r $v warm1 1152 896: $(db_kbench $b -t 1 -s 0.3 -m 1 -v avx512 gemv int4g64 1152 896 1)" >> $A
done; done
db_st tg128
for r in 1 2 3; do for m in q l; do for v in old new pairs; do
    db_left 420 || break
    b=$R/build/tandem; [ $v != new ] && b=/tmp/$v/build/tandem
    echo "r$r $m $v tg128: $($b bench /tmp/tb/$m.tdm -t 2 --tests tg128 --reps 3 2>/dev/null | grep -oE '"tokens_per_s": [0-9.]+' | grep -oE '[0-9.]+$')" >> $A
done; done; done
db_wait_models
db_st beside
db_beside q qwen05b pp512,tg128 1
db_left 540 && db_beside l llama1b pp512,tg128 1
db_st done
cat $A
