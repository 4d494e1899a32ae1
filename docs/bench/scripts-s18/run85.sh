#!/bin/bash
# session 18, run 85: the tile loop's own costs, by leaving stages out (no counters on this host):
# AMX_EPI_MEASURE=3 every panel reads panel 0's B (no weight traffic), 4 = that and no epilogue,
# 2 = no epilogue (run 82's), against the shipped build (gate|up now stored in bf16 only through
# gemm_bf16y; kbench's gemm is the f32 one).
. tools/devbench.sh; db_init 85
db_st build
db_build build/kbench || exit 1
db_st ab
DB_AB_P=6
for s in "9728 896" "1152 896" "16384 2048" "896 4864"; do
  db_ab noB "-DAMX_EPI_MEASURE=3" 1 "$s"
  db_ab noBepi "-DAMX_EPI_MEASURE=4" 1 "$s"
  db_ab noepi "-DAMX_EPI_MEASURE=2" 1 "$s"
  db_left 170 || break
done
python3 tools/abmed.py $A | tee -a $A
db_st done
