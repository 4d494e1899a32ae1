#!/bin/bash
# session 21, run 98: kbench-ab in one process (40 rounds of 0.05 s a build, both builds storing y in
# bf16 as the engine's int8 projections do, -Y 1): an A/A control; AMX_SNAKE (odd row blocks take
# the group's panels last to first); AMX_STPLAIN (y's full rows stored unmasked); AMX_KOUTER with
# passes of 8 panels and of 16 on the down projections; y non-temporal from 256 KB.
. tools/devbench.sh; db_init 98
db_st build
db_build build/kbench build/tandem || exit 1
db_st ab
Q="1152 896|896 896|9728 896|896 4864"; L="3072 2048|2048 2048|16384 2048|2048 8192"
IFS='|' read -ra QS <<< "$Q"; IFS='|' read -ra LS <<< "$L"
export DB_AB_P=40 DB_AB_S=0.05 DB_AB_Y=1
db_ab aa "-DAMX_SNAKE=0" 1 "1152 896" "896 4864" "2048 2048" "2048 8192"
db_ab snake "-DAMX_SNAKE=1" 1 "${QS[@]}" "${LS[@]}"
db_ab stplain "-DAMX_STPLAIN=1" 1 "${QS[@]}" "${LS[@]}"
db_left 420 && db_ab kout8 "-DAMX_KOUTER=1 -DAMX_KOUTER_PB=8" 1 "896 4864" "2048 8192" "2048 2048"
db_left 450 && db_ab kout16 "-DAMX_KOUTER=1" 1 "2048 8192" "896 4864"
db_left 480 && db_ab nt256k "-DAMX_NT_BYTES=262144u" 1 "1152 896" "896 4864" "2048 2048" "2048 8192"
db_left 540 && db_ab snake "-DAMX_SNAKE=1" 2 "1152 896" "2048 8192" "16384 2048"
grep -E "^r[12] |INVALID" $A
db_st done
