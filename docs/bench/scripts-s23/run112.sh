#!/bin/bash
# session 23, run 112: AMX_PRELOAD=1 now shipped: kbench-ab of the build without it (-DAMX_PRELOAD=0;
# ratios alternative / shipped speed, so below 1 is the preload's gain), an A/A control, and
# AMX_EPI_MEASURE=9 (the shipped loop with y's stores sent to an L1 sink: what the stores cost);
# test_kernels on the real tiles; the engine's pp512 interleaved new / old (PRELOAD=0).
. tools/devbench.sh; db_init 112
db_st build
db_build build/kbench build/tandem build/tests/test_kernels || exit 1
db_build /tmp/bold/tandem BUILD=/tmp/bold CFLAGS="-O2 -g -DAMX_PRELOAD=0" || exit 1
db_packages qwen2.5-0.5b:q llama-3.2-1b:l
db_st tests
build/tests/test_kernels 2>&1 | tail -3 >> $A
db_st ab
export DB_AB_P=40 DB_AB_S=0.05 DB_AB_Y=1
db_ab pre0 "-DAMX_PRELOAD=0" 1 "1152 896" "896 896" "9728 896" "896 4864" "2048 2048" "16384 2048"
db_ab aa "-DAMX_AA_CONTROL=1" 1 "1152 896" "9728 896"
db_ab epi9 "-DAMX_EPI_MEASURE=9" 1 "1152 896" "9728 896" "896 4864" "16384 2048"
grep -E "^r1 |INVALID|^# r1" $A
db_st engine
for i in 1 2 3; do
  for m in q l; do
    for b in new old; do
      db_left 560 || break 3
      bin=build; [ $b = old ] && bin=/tmp/bold
      $bin/tandem bench /tmp/tb/$m.tdm -t 2 --tests pp512 --reps 3 --ceilings > /tmp/e.json 2> /tmp/e.txt
      echo "eng $i $m $b: $(grep -oE 'pp512 [a-z]+: tandem [0-9.]+ \(GEMMs [0-9]+ GOP/s, [0-9.]+%' /tmp/e.txt | tr '\n' ' ')" >> $A
    done
  done
done
grep "^eng" $A
db_st done
