#!/bin/bash
# session 22, run 107: run 106 again with the spread epilogue set up once a block (epi_set / epi_rows,
# inlined into the step loop); kbench-ab alternatives: the epilogue between blocks (-DAMX_SPREAD=0),
# the spread without the y prefetch, an A/A control (ratios alternative / shipped speed); the
# engine pp512 interleaved new / old; test_kernels on the real tiles.
. tools/devbench.sh; db_init 107
db_st build
db_build build/kbench build/tandem build/tests/test_kernels || exit 1
db_build /tmp/bold/tandem BUILD=/tmp/bold CFLAGS="-O2 -g -DAMX_SPREAD=0" || exit 1
db_packages qwen2.5-0.5b:q llama-3.2-1b:l
db_st tests
build/tests/test_kernels 2>&1 | tail -3 >> $A
db_st ab
export DB_AB_P=40 DB_AB_S=0.05 DB_AB_Y=1
db_ab old "-DAMX_SPREAD=0" 1 "1152 896" "896 896" "9728 896" "896 4864" "2048 2048" "16384 2048"
db_ab aa "-DAMX_AA_CONTROL=1" 1 "1152 896" "896 896"
db_ab ypf0 "-DAMX_YPF=0" 1 "1152 896" "896 896" "896 4864"
grep -E "^r[12] |INVALID|^# r" $A
db_st engine
for i in 1 2 3; do
  for m in q l; do
    for b in new old; do
      db_left 540 || break 3
      bin=build; [ $b = old ] && bin=/tmp/bold
      $bin/tandem bench /tmp/tb/$m.tdm -t 2 --tests pp512 --reps 3 --ceilings > /tmp/e.json 2> /tmp/e.txt
      echo "eng $i $m $b: $(grep -oE 'pp512 [a-z]+: tandem [0-9.]+ \(GEMMs [0-9]+ GOP/s, [0-9.]+%' /tmp/e.txt | tr '\n' ' ')" >> $A
    done
  done
done
grep "^eng" $A
db_st done
