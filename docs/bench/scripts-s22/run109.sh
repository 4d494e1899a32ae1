#!/bin/bash
# session 22, run 109: with the epilogue spread over the next block (the SwiGLU's work then in the
# tiles' shadow), the fused gate/up (gemm_glu) against apart: kbench ffn (20 rounds of 0.05 s), and
# the engine's pp512 with TANDEM_GLU=1 / unset, interleaved, 3 pairs a model.
. tools/devbench.sh; db_init 109
db_st build
db_build build/kbench build/tandem || exit 1
db_packages qwen2.5-0.5b:q llama-3.2-1b:l
db_st ffn
for s in "4864 896" "8192 2048"; do
  build/kbench -t 2 -s 0.05 -p 20 ffn 512 $s 2>&1 | grep -E "medians|ratio" | sed "s/^/ffn 512 $s: /" >> $A
done
grep "^ffn" $A
db_st engine
for i in 1 2 3; do
  for m in q l; do
    for glu in 0 1; do
      db_left 330 || break 3
      TANDEM_GLU=$glu build/tandem bench /tmp/tb/$m.tdm -t 2 --tests pp512 --reps 3 --ceilings > /tmp/e.json 2> /tmp/e.txt
      echo "eng $i $m glu$glu: $(grep -oE 'pp512 [a-z]+: tandem [0-9.]+ \(GEMMs [0-9]+ GOP/s, [0-9.]+%' /tmp/e.txt | tr '\n' ' ')" >> $A
    done
  done
done
grep "^eng" $A
db_st done
