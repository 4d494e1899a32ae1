#!/bin/bash
# session 32, run 137: the session-32 code on the h200-host Xeon: test_kernels on the real tiles, both
# shapes beside llama.cpp (pp512, tg128, 3 reps, ceilings), the GEMMs' per-shape rates (TANDEM_PROFILE=warm),
# a second round beside llama.cpp as time allows
. tools/devbench.sh; db_init 137
db_peer_models qwen05b llama1b
db_st build
db_build build/tandem build/kbench build/tests/test_kernels || exit 1
db_packages qwen2.5-0.5b:q llama-3.2-1b:l
db_st kernels
timeout 90 build/tests/test_kernels 2>&1 | grep -E "FAIL|passed" >> $A
db_st peak
build/kbench -t 2 -v amx peak >> $A 2>&1
db_wait_models
db_st beside
db_beside q qwen05b pp512,tg128 1
db_beside l llama1b pp512,tg128 1
db_st profile
for m in q l; do TANDEM_PROFILE=warm timeout 60 build/tandem bench /tmp/tb/$m.tdm -t 2 --tests pp512 --reps 2 --ceilings 2>&1 | grep -E "bench rep|matmul" >> $A; done
db_left 430 && db_beside q qwen05b pp512,tg128 2
db_left 500 && db_beside l llama1b pp512,tg128 2
db_st done
cat $A
