#!/bin/bash
# session 16, run 73: the shipped code beside llama.cpp (Llama, Qwen, Qwen, Llama as time allows), with
# TANDEM_PROFILE=1: the matmuls' rates by shape in the same invocation as the ratios and the tile peak.
. tools/devbench.sh; db_init 73
db_st build
db_peer_models llama1b qwen05b
db_build build/tandem || exit 1
db_packages llama-3.2-1b:l qwen2.5-0.5b:q
db_wait_models
db_st bench
export TANDEM_PROFILE=1
db_beside l llama1b pp512,tg128 1
db_left 300 && db_beside q qwen05b pp512,tg128 1
db_left 420 && db_beside q qwen05b pp512,tg128 2
db_left 420 && db_beside l llama1b pp512,tg128 2
grep -h "beside" $A
db_st done
