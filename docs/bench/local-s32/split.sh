#!/bin/sh
# Session 32: split-N tasks for K in one chunk (AMX_SPLIT=1, build/tandem) against the session-31 split
# (AMX_SPLIT=0, /tmp/s0/tandem: make BUILD=/tmp/s0 CFLAGS='-O2 -g -DAMX_SPLIT=0' /tmp/s0/tandem),
# Qwen pp512, interleaved pairs, TANDEM_PROFILE=warm.
for i in 1 2 3 4 5 6; do
  m=qwen2.5-0.5b
  if [ $((i % 2)) = 1 ]; then order="0 1"; else order="1 0"; fi
  for a in $order; do
    echo "== pair $i $m homed=$a"
    if [ $a = 1 ]; then B=build/tandem; else B=/tmp/s0/tandem; fi
    TANDEM_PROFILE=warm $B bench /work/bench/$m.tpk -t 2 --tests pp512 --reps 2 --ceilings 2>&1 | grep -E "bench rep|matmul"
  done
done
