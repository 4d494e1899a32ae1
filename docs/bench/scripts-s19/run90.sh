#!/bin/bash
# session 19, run 90: are y's stores costly for their lines' L1 sets? AMX_EPI_MEASURE=8 (y's rows 64
# bytes further apart, into a buffer of its own) against the shipped build; AMX_YPF=0 (run 88's gain,
# again); A/A. kbench-ab, 40 rounds of 0.05 s a build.
. tools/devbench.sh; db_init 90
db_st build
db_build build/kbench || exit 1
db_st ab
export DB_AB_P=40 DB_AB_S=0.05
for s in "2048 2048" "1152 896"; do
  db_ab e8 "-DAMX_EPI_MEASURE=8" 1 "$s"
  db_ab noypf "-DAMX_YPF=0" 1 "$s"
  db_ab aa "" 1 "$s"
  db_left 150 || break
done
grep -E "^r1|^#" $A
db_st done
