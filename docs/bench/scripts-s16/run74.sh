#!/bin/bash
# session 16, run 74: in-process A/B of AMX GEMM build options against the shipped build
# (kbench-ab -a 1: each round times tile peak, shipped GEMM, alternative GEMM (order swapped every
# round), tile peak; the median of the rounds' alternative / shipped ratios), weights cycled over
# 128 MB. Options: AMX_BLOCK_K (C between K chunks kept in L1), AMX_PFB (B prefetched into L1
# ahead, NTA or T0), AMX_PG=8, MB=512 / 128.
. tools/devbench.sh; db_init 74
db_st build
db_build build/kbench || exit 1
mk() { db_build kbench-ab "AMX_ALT=$2" || exit 1; cp build/kbench-ab /tmp/kab-$1; }
mk bk "-DAMX_BLOCK_K=1"; mk pfb1 "-DAMX_PFB=1"; mk pfb2t0 "-DAMX_PFB=2 -DAMX_PFB_HINT=_MM_HINT_T0"
mk pg8 "-DAMX_PG=8"; mk mb512 "-DMB=512"; mk mb128 "-DMB=128"
db_st ab
ab() { local r=$1 v=$2; shift 2
  local o=$(/tmp/kab-$v -a 1 -t 2 -s 0.2 -p 5 -m 128 -v amx gemm int8 512 $* 2>&1)
  echo "$o" | grep -q INVALID && echo "INVALID $v $*" >> $A
  echo "r$r $v 512 $*: $(echo "$o" | grep -oE 'shipped: median [0-9.]+x' | grep -oE '[0-9.]+x' | tr -d x) x $(echo "$o" | grep -oE 'alternative build: median [0-9.]+%|range [0-9.-]+\)' | tr '\n' ' ')" >> $A; }
for r in 1 2; do
  for s in "896 4864" "2048 8192" "3072 2048" "2048 2048"; do ab $r bk $s; done
  for s in "1152 896" "896 896" "9728 896" "2048 2048" "2048 8192"; do ab $r pfb1 $s; ab $r pfb2t0 $s; done
  for s in "1152 896" "896 896" "896 4864" "2048 2048"; do ab $r pg8 $s; done
  for s in "1152 896" "896 896" "9728 896"; do ab $r mb512 $s; done
  for s in "896 4864" "2048 8192"; do ab $r mb128 $s; done
  db_left 420 || break
done
python3 tools/abmed.py $A | tee -a $A
db_st done
