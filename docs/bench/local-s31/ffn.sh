#!/bin/sh
# Session 31: the gate|up output's path on the dev machine. Three settings, interleaved (order rotating):
#   base  the shipped build (gate|up y in bf16, stored non-temporally: 10-16 MB)
#   ntoff a build with -DAMX_NT_BYTES=0xffffffffu (every y through the caches; /tmp/ntoff/tandem)
#   glu   the shipped build with TANDEM_GLU=1 (the fused gate/up GEMM: act(gate) * up in bf16, half the bytes)
# pp512, TANDEM_PROFILE=warm, 2 reps each, --ceilings.
run() { # setting model
  case $1 in
    base) b=build/tandem; e="";;
    ntoff) b=/tmp/ntoff/tandem; e="";;
    glu) b=build/tandem; e="TANDEM_GLU=1";;
  esac
  echo "== $i $2 $1"
  env $e TANDEM_PROFILE=warm $b bench /work/bench/$2.tpk -t 2 --tests pp512 --reps 2 --ceilings 2>&1 | grep -E "bench rep|matmul|prefill: [0-9]+ calls"
}
for i in 1 2 3 4; do
  for m in qwen2.5-0.5b llama-3.2-1b; do
    case $i in 1) o="base ntoff glu";; 2) o="ntoff glu base";; 3) o="glu base ntoff";; *) o="base glu ntoff";; esac
    for s in $o; do run $s $m; done
  done
done
