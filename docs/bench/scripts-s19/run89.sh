#!/bin/bash
# session 19, run 89: with AMX_YPF shipped (run 88), kbench-ab (40 rounds of 0.05 s a build, weights
# made once a shape): AMX_EPI_SPREAD (each block's epilogue a few rows per K step of the next block),
# and where the remaining time goes: AMX_EPI_MEASURE=1 (y's stores to an L1 sink), 2 (no epilogue),
# 4 (no epilogue, no weight traffic); the shipped build's share of the tile peak beside each.
. tools/devbench.sh; db_init 89
db_st build
db_build build/kbench || exit 1
db_st ab
export DB_AB_P=40 DB_AB_S=0.05
for s in "1152 896" "2048 2048" "896 4864" "9728 896"; do
  db_ab sp "-DAMX_EPI_SPREAD=1" 1 "$s"
  db_ab e1 "-DAMX_EPI_MEASURE=1" 1 "$s"
  db_ab e2 "-DAMX_EPI_MEASURE=2" 1 "$s"
  db_ab e4 "-DAMX_EPI_MEASURE=4" 1 "$s"
  db_st "ab $s"
  db_left 290 || break
done
grep -E "^r1|^#" $A
db_st done
