#!/bin/bash
# session 21, run 100: what one core reaches beside two. kbench paired with the tile peak (20
# rounds of 0.05 s; -Y 1: the f32 and the bf16 output of the shipped build) on the eight int8
# shapes with 1 and with 2 threads; bf16 weights on two; the engine's pp512 GEMM share with -t 1
# and -t 2, interleaved.
. tools/devbench.sh; db_init 100
db_st build
db_build build/kbench build/tandem || exit 1
db_st packages
db_packages qwen2.5-0.5b:q llama-3.2-1b:l
db_st kbench
for s in "1152 896" "896 896" "9728 896" "896 4864" "3072 2048" "2048 2048" "16384 2048" "2048 8192"; do
  for t in 1 2; do
    o=$(build/kbench -Y 1 -t $t -s 0.05 -p 20 -m 128 -v amx gemm int8 512 $s 2>&1)
    echo "k t$t int8 $s: f32 $(echo "$o" | grep -oE 'median [0-9.]+% of the peak beside it' | head -1 | grep -oE '[0-9.]+%'); bf16 y $(echo "$o" | grep -oE 'alternative build: median [0-9.]+%' | grep -oE '[0-9.]+%')" >> $A
  done
done
for s in "2048 2048" "896 896"; do for t in 1 2; do
  o=$(build/kbench -t $t -s 0.05 -p 20 -m 128 -v amx gemm bf16 512 $s 2>&1)
  echo "k t$t bf16 $s: $(echo "$o" | grep -oE 'median [0-9.]+% of the peak beside it' | head -1 | grep -oE '[0-9.]+%')" >> $A
done; done
grep "^k " $A
db_st engine
for r in 1 2; do for m in l q; do for t in 1 2; do
  db_left 540 || break 3
  timeout 90 build/tandem bench /tmp/tb/$m.tdm -t $t --tests pp512 --reps 3 --ceilings --md /tmp/g.md > /tmp/g.json 2>/dev/null
  echo "e$r t$t $m: $(grep -E '^\| pp512' /tmp/g.md | cut -d'|' -f4) $(grep -o 'GEMM kernels ran [0-9.]* TOP/s = \*\*[0-9]*%' /tmp/g.md) $(grep -o 'range [0-9-]*%' /tmp/g.md | head -1)" >> $A
done; done; done
grep -E "^e[0-9] " $A
db_st done
