#!/bin/bash
# session 23, run 115: the KV hand-off by context length with the shipped code (Llama-3.2-1B shape,
# bf16 KV, 2 threads), for the table in docs/benchmarks.md
. tools/devbench.sh; db_init 115
db_build build/tandem || exit 1
db_packages llama-3.2-1b:l
db_st bench
build/tandem bench /tmp/tb/l.tdm -t 2 --tests pp512 --reps 3 --handoff 512,2048,8192,32768 --md $OUT/r115-handoff.md > $OUT/r115-handoff.json 2>> $A
db_st done
cat $OUT/r115-handoff.md
