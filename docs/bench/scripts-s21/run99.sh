#!/bin/bash
# session 21, run 99: kbench-ab in one process (40 rounds of 0.05 s a build, both builds storing y in
# bf16, -Y 1): AMX_YPF2 (the next row block's y lines into L2 over a block's last chunk), with and
# without AMX_YPF; y non-temporal from 1 MB; 512-row tasks for Llama's down (A 4 MB) and o; then the
# engine, pp512 with the paired GEMM share, the shipped build against y non-temporal from 256 KB,
# interleaved.
. tools/devbench.sh; db_init 99
db_st build
db_build build/kbench build/tandem || exit 1
mkdir -p /tmp/bnt && db_build BUILD=/tmp/bnt CFLAGS="-O2 -g -DAMX_NT_BYTES=262144u" /tmp/bnt/tandem || echo "nt build failed" >> $A
db_st packages
db_packages qwen2.5-0.5b:q llama-3.2-1b:l
db_st ab
export DB_AB_P=40 DB_AB_S=0.05 DB_AB_Y=1
db_ab aa "-DAMX_YPF2=0" 1 "896 896" "2048 2048"
db_ab ypf2 "-DAMX_YPF2=1" 1 "1152 896" "896 896" "896 4864" "3072 2048" "2048 2048" "2048 8192"
db_ab ypf2only "-DAMX_YPF2=1 -DAMX_YPF=0" 1 "1152 896" "896 896" "2048 2048" "2048 8192"
db_ab wide4m "-DAMX_MB_WIDE_A=4194304u -DAMX_MB_WIDE_N=2048" 1 "2048 8192" "2048 2048"
db_ab nt1m "-DAMX_NT_BYTES=1048576u" 1 "2048 2048" "2048 8192" "3072 2048"
grep -E "^r[12] |INVALID" $A
db_st engine
for r in 1 2 3; do for m in l q; do for b in build /tmp/bnt; do
  db_left 560 || break 3
  timeout 60 $b/tandem bench /tmp/tb/$m.tdm -t 2 --tests pp512 --reps 3 --ceilings --md /tmp/g.md > /tmp/g.json 2>/dev/null
  echo "r$r ${b##*/} $m: $(grep -E '^\| pp512' /tmp/g.md | cut -d'|' -f4) $(grep -o 'GEMM kernels ran [0-9.]* TOP/s = \*\*[0-9]*%' /tmp/g.md) $(grep -o 'range [0-9-]*%' /tmp/g.md | head -1)" >> $A
done; done; done
grep -E "^r[0-9] (build|bnt) " $A
db_st done
