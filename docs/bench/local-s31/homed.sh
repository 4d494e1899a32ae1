#!/bin/sh
# Session 31: homed tasks (tm_pool_run_homed: the GEMMs' row blocks and the engine's row passes on one worker first,
# the rest stolen) against the dynamic split (TANDEM_HOMED=0), pp512, interleaved pairs, TANDEM_PROFILE=warm.
for i in 1 2 3 4 5; do
  for m in qwen2.5-0.5b llama-3.2-1b; do
    if [ $((i % 2)) = 1 ]; then order="0 1"; else order="1 0"; fi
    for a in $order; do
      echo "== pair $i $m homed=$a"
      TANDEM_HOMED=$a TANDEM_PROFILE=warm build/tandem bench /work/bench/$m.tpk -t 2 --tests pp512 --reps 2 --ceilings 2>&1 | grep -E "bench rep|matmul"
    done
  done
done
