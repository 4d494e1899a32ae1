#!/bin/bash
# PREPARED in session 22, NOT RUN as it is: session 23 ran it extended as docs/bench/scripts-s23/run111.sh.
# (prepared in session 22, not yet run) amx_tileloop ystore with modes 16-18: a K = 896 block's
# end without an epilogue (C kept in tiles against stored; the next block's first A / A and B
# tiles loaded before the C stores), one thread and two.
. tools/devbench.sh; db_init 111
db_st build
db_build build/libtandem.a || exit 1
D=$R/.devdeps
gcc -O2 -std=c11 -D_GNU_SOURCE -march=sapphirerapids -I$D/include -I$D/include/cjson -Isrc -Iinclude tools/amx_tileloop.c \
  build/libtandem.a -L$D/lib -lcjson -lpcre2-8 -lutf8proc -lmicrohttpd -lm -pthread -o /tmp/atl >> $A 2>&1 || exit 1
db_st one-thread
taskset -c 1 /tmp/atl ystore 1152 >> $A 2>&1
db_st two-threads
taskset -c 1 /tmp/atl ystore 1152 > /tmp/c1.txt 2>&1 & taskset -c 2 /tmp/atl ystore 1152 > /tmp/c2.txt 2>&1; wait
sed 's/^/cpu1 /' /tmp/c1.txt >> $A; sed 's/^/cpu2 /' /tmp/c2.txt >> $A
db_st done
# and the same in gemm_amx.c (AMX_PRELOAD, off): kbench-ab, ratios alternative / shipped speed
export DB_AB_P=40 DB_AB_S=0.05 DB_AB_Y=1
db_build build/kbench || exit 1
db_ab pre1 "-DAMX_PRELOAD=1" 1 "1152 896" "9728 896" "896 4864" "16384 2048"
db_ab pre2 "-DAMX_PRELOAD=2" 1 "1152 896" "9728 896" "896 4864" "16384 2048"
db_ab aa "-DAMX_AA_CONTROL=1" 1 "1152 896" "9728 896"
grep -E "^r1 |INVALID|^# r1" $A
db_st done2
