#!/bin/sh
# tools/localab.sh NEW_TANDEM OLD_TANDEM PAIRS MODEL...: two builds' pp512 inside the engine on this machine,
# interleaved pairs (odd pairs the old build first), TANDEM_PROFILE=warm, /work/bench/MODEL.tpk, 2 threads.
# Prints "== pair I MODEL homed=1|0" (1: the new build) before each run's rep and matmul lines, the format
# docs/bench/local-s31/affine_sum.py summarizes.
new=$1 old=$2 pairs=$3; shift 3
for i in $(seq "$pairs"); do
  for m in "$@"; do
    if [ $((i % 2)) = 1 ]; then order="0 1"; else order="1 0"; fi
    for a in $order; do
      echo "== pair $i $m homed=$a"
      if [ $a = 1 ]; then B=$new; else B=$old; fi
      TANDEM_PROFILE=warm $B bench /work/bench/$m.tpk -t 2 --tests pp512 --reps 2 --ceilings 2>&1 | grep -E "bench rep|matmul"
    done
  done
done
