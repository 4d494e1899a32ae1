#!/bin/bash
# session 36, run 142 (h200-host Xeon): tg128 of both shapes with three builds interleaved: session
# 35's gemv_q4.inc (.devdeps/gemv_q4_s35.inc), the shipped one without each task's first-8-KB
# request (-DQ4_START=0: x in registers only), and the shipped one; then both shapes beside
# llama.cpp (pp512, tg128, 3 reps, ceilings)
. tools/devbench.sh; db_init 142
db_peer_models qwen05b llama1b
db_st build
db_build build/tandem || exit 1
for v in old reg; do
    mkdir -p /tmp/$v && cp -r src include tools tests Makefile /tmp/$v/ && ln -s $R/.devdeps /tmp/$v/.devdeps
done
cp .devdeps/gemv_q4_s35.inc /tmp/old/src/engine/cpu/gemv_q4.inc
(cd /tmp/old && sh .devdeps/build.sh build/tandem > /tmp/b-old.log 2>&1) & P1=$!
(cd /tmp/reg && sh .devdeps/build.sh CFLAGS="-O2 -g -DQ4_START=0" build/tandem > /tmp/b-reg.log 2>&1) & P2=$!
db_packages qwen2.5-0.5b:q llama-3.2-1b:l
wait $P1 $P2
ls -la /tmp/old/build/tandem /tmp/reg/build/tandem >> $A 2>&1 || tail -5 /tmp/b-old.log /tmp/b-reg.log >> $A
db_st tg128
for r in 1 2 3 4; do for m in q l; do for v in old reg new; do
    db_left 330 || break
    b=$R/build/tandem; [ $v != new ] && b=/tmp/$v/build/tandem
    echo "r$r $m $v tg128: $($b bench /tmp/tb/$m.tdm -t 2 --tests tg128 --reps 3 2>/dev/null | grep -oE '"tokens_per_s": [0-9.]+' | grep -oE '[0-9.]+$')" >> $A
done; done; done
db_wait_models
db_st beside
db_beside q qwen05b pp512,tg128 1
db_left 500 && db_beside l llama1b pp512,tg128 1
db_st done
cat $A
