#!/bin/bash
# session 21, run 102: run 101's split A/B again with the larger ranges first (the ratio is
# session 20's split / this one), kbench-ab, both builds storing y in bf16, 40 rounds of 0.05 s.
. tools/devbench.sh; db_init 102
db_st build
db_build build/kbench || exit 1
db_st ab
export DB_AB_P=40 DB_AB_S=0.05 DB_AB_Y=1
db_ab splitold "-DAMX_SPLIT_OLD=1" 1 "9728 896" "1152 896" "896 4864" "16384 2048"
db_ab splitold "-DAMX_SPLIT_OLD=1" 2 "9728 896" "1152 896"
o=$(/tmp/kab-splitold -a 1 -Y 1 -t 2 -s 0.05 -p 40 -m 128 -v amx gemm int8 64 1152 896 2>&1)
echo "r1 splitold 64 1152 896: $(echo "$o" | grep -oE 'build first\): median [0-9.]+x' | grep -oE '[0-9.]+' | head -1) x" >> $A
grep -E "^r[12] |INVALID|^# r" $A
db_st done
