#!/bin/bash
# session 15, run 69: the shipped code (K chunk 16, CPU 0 left out) beside llama.cpp: Llama, Qwen.
. tools/devbench.sh; db_init 69
db_st build
db_peer_models llama1b qwen05b
db_build build/tandem || exit 1
db_packages llama-3.2-1b:l qwen2.5-0.5b:q
db_wait_models
db_st bench
db_beside l llama1b pp512,tg128 1
db_left 230 && db_beside q qwen05b pp512,tg128 1
grep -h "beside" $A
db_st done
