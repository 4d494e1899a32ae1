#!/bin/bash
# session 19, run 87: (1) the CPUs' topology; (2) AMX_PROF cycles per call (pack / tile loop /
# epilogue) on five shapes; (3) kbench-ab with the weights made once a shape (new), 64 rounds of
# 0.05 s a build: A/A, AMX_EPI_MEASURE=2 (no epilogue) and 7 (no epilogue, no tile stores where K is
# one chunk: the block end's cost), AMX_CBIAS, every y non-temporal (AMX_NT_BYTES=0).
. tools/devbench.sh; db_init 87
db_st build
( lscpu -e; for c in 0 1 2 3; do echo "cpu$c siblings $(cat /sys/devices/system/cpu/cpu$c/topology/thread_siblings_list)"; done
  nproc; cat /proc/loadavg ) >> $A 2>&1
db_build build/kbench || exit 1
db_build build-prof/kbench BUILD=build-prof CFLAGS="-O2 -g -DAMX_PROF" || exit 1
db_st prof
for s in "1152 896" "9728 896" "896 4864" "2048 2048" "16384 2048"; do
  echo "prof $s: $(build-prof/kbench -t 2 -s 1 -m 128 -v amx gemm int8 512 $s 2>&1 | grep -E 'GFLOP|amx_prof' | tr '\n' ' ')" >> $A
done
db_st ab
export DB_AB_P=64 DB_AB_S=0.05
for s in "1152 896" "9728 896" "896 4864" "2048 2048" "16384 2048"; do
  db_ab aa "" 1 "$s"
  db_ab e2 "-DAMX_EPI_MEASURE=2" 1 "$s"
  db_ab e7 "-DAMX_EPI_MEASURE=7" 1 "$s"
  db_ab cbias "-DAMX_CBIAS=1" 1 "$s"
  db_ab nt0 "-DAMX_NT_BYTES=0" 1 "$s"
  db_st "ab $s"
  db_left 540 || break
done
grep -E "^r1|^#" $A | tail -60
db_st done
