#!/bin/sh
# Session 32: the fused gate/up's SiLU to ~1e-4 for bf16 y (AMX_SILU_LP=1, build/tandem) against vec_exp.inc's
# (AMX_SILU_LP=0: make BUILD=/tmp/lp0 CFLAGS='-O2 -g -DAMX_SILU_LP=0' /tmp/lp0/tandem), pp512, interleaved pairs,
# TANDEM_PROFILE=warm (the "homed=" tag below is affine_sum.py's setting: 1 the new build)
# (AMX_SILU_LP was the switch's name then; AMX_ACT_LP since, covering GELU-tanh too)
for i in 1 2 3 4 5; do
  for m in qwen2.5-0.5b llama-3.2-1b; do
    if [ $((i % 2)) = 1 ]; then order="0 1"; else order="1 0"; fi
    for a in $order; do
      echo "== pair $i $m homed=$a"
      if [ $a = 1 ]; then B=build/tandem; else B=/tmp/lp0/tandem; fi
      TANDEM_PROFILE=warm $B bench /work/bench/$m.tpk -t 2 --tests pp512 --reps 2 --ceilings 2>&1 | grep -E "bench rep|matmul"
    done
  done
done
