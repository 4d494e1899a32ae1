#!/bin/bash
# session 34, run 139: the session-34 code (the epilogue's row loops) on the h200-host Xeon:
# test_kernels on the real tiles; kbench-ab with session 33's gemm_amx.c (carried as
# .devdeps/gemm_amx_s33.c) as the alternative, both storing y in bf16 (ratios are old / new);
# both shapes beside llama.cpp (pp512, tg128, 3 reps, ceilings); the engine's pp512 with the
# new and the old build in turn as time allows
. tools/devbench.sh; db_init 139
db_peer_models qwen05b llama1b
db_st build
db_build build/tandem build/kbench build/tests/test_kernels build/libtandem.a || exit 1
# the old build: session 33's gemm_amx.c in a tree of its own
rm -rf /tmp/oldtree && mkdir -p /tmp/oldtree && cp -r Makefile include src tools .devdeps /tmp/oldtree/
cp .devdeps/gemm_amx_s33.c /tmp/oldtree/src/engine/cpu/gemm_amx.c
(cd /tmp/oldtree && sh .devdeps/build.sh build/tandem > /tmp/oldbuild.log 2>&1) || tail -20 /tmp/oldbuild.log >> $A
db_packages qwen2.5-0.5b:q llama-3.2-1b:l
db_st kernels
timeout 120 build/tests/test_kernels 2>&1 | grep -E "FAIL|passed" >> $A
db_st ab
cp src/engine/cpu/gemm_amx.c /tmp/gemm_amx_new.c
cp .devdeps/gemm_amx_s33.c src/engine/cpu/gemm_amx.c && touch -d '2000-01-01' src/engine/cpu/gemm_amx.c
DB_AB_Y=1 DB_AB_P=8 DB_AB_S=0.1 db_ab s33 "" 1 "1152 896" "896 896" "896 4864" "2048 2048"
cp /tmp/gemm_amx_new.c src/engine/cpu/gemm_amx.c
db_wait_models
db_st beside
db_beside q qwen05b pp512,tg128 1
db_beside l llama1b pp512,tg128 1
db_st pairs
db_pairs build /tmp/oldtree/build 3 540 q l
db_st done
cat $A
