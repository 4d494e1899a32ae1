#!/bin/bash
# session 19, run 88: kbench-ab (weights made once a shape; 48 rounds of 0.05 s a build) on the
# candidates run 87's precise harness pointed to: AMX_YPF (y's lines fetched for writing during the
# block), AMX_BPF_L1=1/2 (B into L1 steps ahead), AMX_PF_IDIV=1 (the old divisions in the L2
# prefetch spread, against the new accumulator), AMX_EPI_MEASURE=7 (no epilogue, no C stores where K
# is one chunk) and 3 (no weight traffic); then Qwen pp512 with the paired share, shipped build and
# AMX_YPF build interleaved.
. tools/devbench.sh; db_init 88
db_st build
db_build build/kbench build/tandem || exit 1
db_build build-ypf/tandem BUILD=build-ypf CFLAGS="-O2 -g -DAMX_YPF=1" || exit 1
db_packages qwen2.5-0.5b:q
db_st ab
export DB_AB_P=48 DB_AB_S=0.05
for s in "1152 896" "896 4864" "2048 2048" "2048 8192" "9728 896"; do
  case "$s" in "1152 896"|"2048 2048") db_ab aa "" 1 "$s";; esac
  db_ab ypf "-DAMX_YPF=1" 1 "$s"
  db_ab bpf1 "-DAMX_BPF_L1=1" 1 "$s"
  db_ab bpf2 "-DAMX_BPF_L1=2" 1 "$s"
  db_ab idiv "-DAMX_PF_IDIV=1" 1 "$s"
  db_ab e7 "-DAMX_EPI_MEASURE=7" 1 "$s"
  db_ab e3 "-DAMX_EPI_MEASURE=3" 1 "$s"
  db_st "ab $s"
  db_left 400 || break
done
grep -E "^r1" $A
db_st engine
for r in 1 2 3 4; do for b in build build-ypf; do
  db_left 560 || break 2
  timeout 40 $b/tandem bench /tmp/tb/q.tdm -t 2 --tests pp512 --reps 3 --ceilings --md /tmp/g.md > /tmp/g.json 2>/dev/null
  echo "r$r $b q: $(grep -E '^\| pp512' /tmp/g.md | cut -d'|' -f4) $(grep -o 'GEMM kernels ran [0-9.]* TOP/s = \*\*[0-9]*%' /tmp/g.md)" >> $A
done; done
grep -E "^r[0-9] build" $A
db_st done
