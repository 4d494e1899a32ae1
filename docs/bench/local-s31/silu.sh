#!/bin/sh
# Session 31: silu's divide (shipped) against the reciprocal estimate and one Newton step (a build with
# -DTM_SILU_RCP=1 in /tmp/rcp; that option was removed after this run, not kept), inside the fused gate/up GEMM's epilogue; pp512, TANDEM_PROFILE=warm,
# interleaved pairs (the order alternating).
for i in 1 2 3 4 5; do
  for m in qwen2.5-0.5b llama-3.2-1b; do
    if [ $((i % 2)) = 1 ]; then order="build/tandem /tmp/rcp/tandem"; else order="/tmp/rcp/tandem build/tandem"; fi
    for b in $order; do
      echo "== $i $m $b"
      TANDEM_PROFILE=warm $b bench /work/bench/$m.tpk -t 2 --tests pp512 --reps 2 --ceilings 2>&1 | grep -E "bench rep|matmul|prefill: [0-9]+ calls"
    done
  done
done
