#!/bin/bash
# session 20, run 95: the long-K (down) projections, kbench-ab in one process (40 rounds of 0.05 s):
# AMX_KOUTER (K chunks outside the panel groups: a chunk of A read from L2 by every group) and AMX_KB=8
# (16 KB A and B chunks), on 896 x 4864 and 2048 x 8192; 1152 x 896 (one chunk: KOUTER leaves it) as control.
. tools/devbench.sh; db_init 95
db_st ab
DB_AB_P=40 DB_AB_S=0.05 db_ab kouter "-DAMX_KOUTER=1" 1 "896 4864" "2048 8192" "1152 896"
DB_AB_P=40 DB_AB_S=0.05 db_ab kb8 "-DAMX_KB=8" 1 "896 4864" "2048 8192"
grep -E "^r1 |INVALID" $A
db_st done
