#!/bin/bash
# session 17, run 78: run 77's options again on Qwen's shapes, kbench-ab with 8 rounds per shape and the
# ratio taken over pairs of rounds (one with each build first: run 77's A/A control read 1.04-1.15x, an
# order bias with 5 rounds), beside an A/A control on every shape.
. tools/devbench.sh; db_init 78
db_st build
db_build build/kbench || exit 1
db_st ab
for r in 1 2 3; do
  for s in "1152 896" "896 896" "9728 896" "896 4864"; do
    db_ab aa "" $r "$s"
    db_ab ip "-DAMX_INPLACE=1" $r "$s"
    [ "$s" != "896 4864" ] && db_ab bs "-DAMX_BSTAT=1" $r "$s"
    db_left 500 || break 2
  done
done
python3 tools/abmed.py $A | tee -a $A
db_st done
