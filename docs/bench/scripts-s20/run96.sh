#!/bin/bash
# session 20, run 96 (the warm machine after run 95, its kbench-ab builds kept): AMX_KOUTER again on
# 896 x 4864 twice and 2048 x 8192, and an A/A control, as one command line:
. tools/devbench.sh; db_init 96; DB_AB_P=40 DB_AB_S=0.05 db_ab kouter "-DAMX_KOUTER=1" 2 "896 4864" "896 4864" "2048 8192"; DB_AB_P=40 DB_AB_S=0.05 db_ab aa "-DAMX_AA_CONTROL=1" 2 "896 4864"; cp $A $OUT/; grep -E "^r2|^# r2|INVALID" $A
