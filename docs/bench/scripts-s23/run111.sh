#!/bin/bash
# session 23, run 111: (1) amx_tileloop ystore modes 0-18 (K = 896 block ends: C kept in tiles, the
# next block's first A / A and B tiles loaded before the C stores), one thread and two; (2) the same
# in gemm_amx.c (AMX_PRELOAD=1|2, off) by kbench-ab; (3) where the shipped GEMM's time goes now, by
# kbench-ab of the measurement builds against it (EPI_MEASURE 2: no epilogue, 3: no weight traffic,
# 4: neither; ratios alternative / shipped speed); (4) TANDEM_PROFILE=warm on Qwen pp512 (per-GEMM).
. tools/devbench.sh; db_init 111
db_st build
db_build build/libtandem.a build/tandem build/kbench || exit 1
D=$R/.devdeps
gcc -O2 -std=c11 -D_GNU_SOURCE -march=sapphirerapids -I$D/include -I$D/include/cjson -Isrc -Iinclude tools/amx_tileloop.c \
  build/libtandem.a -L$D/lib -lcjson -lpcre2-8 -lutf8proc -lmicrohttpd -lm -pthread -o /tmp/atl >> $A 2>&1 || exit 1
db_packages qwen2.5-0.5b:q
db_st one-thread
taskset -c 1 /tmp/atl ystore 1152 >> $A 2>&1
db_st two-threads
taskset -c 1 /tmp/atl ystore 1152 > /tmp/c1.txt 2>&1 & taskset -c 2 /tmp/atl ystore 1152 > /tmp/c2.txt 2>&1; wait
sed 's/^/cpu1 /' /tmp/c1.txt >> $A; sed 's/^/cpu2 /' /tmp/c2.txt >> $A
db_st ab
export DB_AB_P=40 DB_AB_S=0.05 DB_AB_Y=1
db_ab pre1 "-DAMX_PRELOAD=1" 1 "1152 896" "9728 896" "896 4864" "16384 2048"
db_ab pre2 "-DAMX_PRELOAD=2" 1 "1152 896" "9728 896" "896 4864" "16384 2048"
db_ab aa "-DAMX_AA_CONTROL=1" 1 "1152 896" "9728 896"
db_ab epi2 "-DAMX_EPI_MEASURE=2" 1 "1152 896" "9728 896" "896 4864"
db_ab epi3 "-DAMX_EPI_MEASURE=3" 1 "1152 896" "9728 896" "896 4864"
db_ab epi4 "-DAMX_EPI_MEASURE=4" 1 "1152 896" "9728 896" "896 4864"
grep -E "^r1 |INVALID|^# r1" $A
db_st profile
for i in 1 2; do
  db_left 560 || break
  TANDEM_PROFILE=warm build/tandem bench /tmp/tb/q.tdm -t 2 --tests pp512 --reps 3 --ceilings > /tmp/e.json 2> /tmp/e.txt
  sed "s/^/prof$i /" /tmp/e.txt >> $A
done
db_st done
