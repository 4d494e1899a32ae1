#!/bin/bash
# session 34, run 140: the session's final code on the h200-host Xeon: test_kernels, test_attn and
# test_engine_conf on the real tiles; kbench attnp with session 33's attn_amx.c (carried as
# .devdeps/attn_amx_s33.c) and the new one in turn; both shapes beside llama.cpp (pp512, tg128,
# 3 reps, ceilings) and pp4096
. tools/devbench.sh; db_init 140
db_peer_models qwen05b llama1b
db_st build
db_build build/tandem build/kbench build/tests/test_kernels build/tests/test_attn build/tests/test_engine_conf build/libtandem.a || exit 1
D=$R/.devdeps
gcc -D_GNU_SOURCE -Iinclude -Isrc -I$D/include -I$D/include/cjson -Ibuild/gen -std=c11 -O2 -mavx512f -mavx512bw -mavx512vl \
    -mavx512dq -mavx512vnni -mavx512bf16 -mfma -mf16c -mamx-tile -mamx-bf16 -mamx-int8 -c $D/attn_amx_s33.c -o /tmp/attn_old.o &&
gcc -D_GNU_SOURCE -Iinclude -Isrc -I$D/include -I$D/include/cjson -Ibuild/gen -std=c11 -O2 -o /tmp/kb_old tools/kbench.c /tmp/attn_old.o \
    build/libtandem.a -L$D/lib -lcjson -lpcre2-8 -lutf8proc -lmicrohttpd -lm -pthread >> $A 2>&1
db_packages qwen2.5-0.5b:q llama-3.2-1b:l
db_st tests
timeout 120 build/tests/test_kernels 2>&1 | grep -E "FAIL|passed" >> $A
timeout 120 build/tests/test_attn 2>&1 | grep -E "FAIL|passed" >> $A
timeout 150 build/tests/test_engine_conf 2>&1 | grep -E "cpu-amx,|passed" | head -8 >> $A
db_st attnp
for r in 1 2 3; do for b in /tmp/kb_old build/kbench; do
    echo "attnp $r $b: $($b -t 2 -s 0.5 -v amx attnp 512 14 2 64 3584 2>&1 | grep -oE 'err [0-9.e-]+|[0-9.]+ GFLOP/s' | tr '\n' ' ') T512: $($b -t 2 -s 0.5 -v amx attnp 512 14 2 64 2>&1 | grep -oE '[0-9.]+ GFLOP/s')" >> $A
done; done
db_wait_models
db_st beside
db_beside q qwen05b pp512,tg128 1
db_beside l llama1b pp512,tg128 1
db_left 450 && db_beside q qwen05b pp4096 1
db_st done
cat $A
