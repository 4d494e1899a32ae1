#!/bin/bash
# session 33, run 138: the session-33 code on the h200-host Xeon: the tile loads' cost by data
# (amx_tileloop data), the peaks with and without a 2 x 2 block's tile loads (kbench peak),
# test_kernels on the real tiles, both shapes beside llama.cpp (pp512, tg128, 3 reps, ceilings:
# amx_loaded_* and gemm_share_loaded), a second round as time allows
. tools/devbench.sh; db_init 138
db_peer_models qwen05b llama1b
db_st build
db_build build/tandem build/kbench build/tests/test_kernels build/libtandem.a || exit 1
gcc -O2 -std=c11 -D_GNU_SOURCE -march=sapphirerapids -Isrc -Iinclude -I.devdeps/include tools/amx_tileloop.c build/libtandem.a \
    -L.devdeps/lib -lcjson -lpcre2-8 -lutf8proc -lmicrohttpd -lm -pthread -o /tmp/amx_tileloop >> $A 2>&1
db_packages qwen2.5-0.5b:q llama-3.2-1b:l
db_st tileloop
taskset -c 2 /tmp/amx_tileloop data >> $A 2>&1
db_st peak
for i in 1 2 3; do build/kbench -t 2 -s 0.5 peak >> $A 2>&1; done
db_st kernels
timeout 120 build/tests/test_kernels 2>&1 | grep -E "FAIL|passed" >> $A
db_wait_models
db_st beside
db_beside q qwen05b pp512,tg128 1
db_beside l llama1b pp512,tg128 1
db_left 430 && db_beside q qwen05b pp512,tg128 2
db_left 500 && db_beside l llama1b pp512,tg128 2
db_st done
cat $A
