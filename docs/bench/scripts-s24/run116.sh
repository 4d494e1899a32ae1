#!/bin/bash
# Prepared in session 23, run in session 24 (docs/bench/xeon-s24-run116.txt; the option then removed
# from gemm_amx.c, so this no longer builds as is). AMX_STORE_LATE=1 (a block's C tile stores
# deferred into the next block's first K step, each just before that tile's first product there):
# test_kernels on the real tiles with it, kbench-ab against the shipped build (ratios alternative /
# shipped speed, above 1: the late stores are faster) on six shapes, with the B tiles also preloaded
# (AMX_PRELOAD=2) on four, and an A/A control; if it wins,
# the engine's pp512 interleaved (a build with it as "new" against the shipped as "old").
# Copy to .devdeps/ and run with .devdeps carried.
. tools/devbench.sh; db_init 116
db_st build
db_build build/kbench build/tandem || exit 1
db_build /tmp/bsl/tests/test_kernels /tmp/bsl/tandem BUILD=/tmp/bsl CFLAGS="-O2 -g -DAMX_STORE_LATE=1" || exit 1
db_packages qwen2.5-0.5b:q llama-3.2-1b:l
db_st tests
/tmp/bsl/tests/test_kernels 2>&1 | tail -3 >> $A
db_st ab
export DB_AB_P=40 DB_AB_S=0.05 DB_AB_Y=1
db_ab late "-DAMX_STORE_LATE=1" 1 "1152 896" "896 896" "9728 896" "896 4864" "2048 2048" "16384 2048"
db_ab late2 "-DAMX_STORE_LATE=1 -DAMX_PRELOAD=2" 1 "1152 896" "9728 896" "896 4864" "16384 2048"
db_ab aa "-DAMX_AA_CONTROL=1" 1 "1152 896" "9728 896"
grep -E "^r1 |INVALID|^# r1" $A
db_st engine
db_pairs /tmp/bsl build 3 560 q l
grep "^eng" $A
db_st done
