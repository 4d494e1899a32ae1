#!/bin/bash
# session 15, run 64: the AMX GEMM's epilogue spread over the next block's K steps (HEAD,
# AMX_EPI_PIPE=1) against right after its block (-DAMX_EPI_PIPE=0), and the next block's A
# prefetched into L1 (-DAMX_PFA=1): test_kernels on real tiles, kbench -p shares of the tile peak
# interleaved, AMX_PROF splits, Qwen pp512 interleaved; then HEAD beside llama.cpp (Qwen).
. tools/devbench.sh; db_init 64
db_st build
db_peer_models qwen05b llama1b
db_build build/tandem build/kbench build/tests/test_kernels || exit 1
db_build BUILD=/tmp/p0 CFLAGS="-O2 -g -DAMX_EPI_PIPE=0" /tmp/p0/tandem /tmp/p0/kbench || exit 1
db_build BUILD=/tmp/pfa CFLAGS="-O2 -g -DAMX_PFA=1" /tmp/pfa/kbench || exit 1
db_build BUILD=/tmp/pr1 CFLAGS="-O2 -g -DAMX_PROF" /tmp/pr1/kbench || exit 1
db_build BUILD=/tmp/pr0 CFLAGS="-O2 -g -DAMX_PROF -DAMX_EPI_PIPE=0" /tmp/pr0/kbench || exit 1
db_st test_kernels
timeout 100 build/tests/test_kernels > /tmp/tk.log 2>&1; echo "test_kernels rc=$? $(tail -1 /tmp/tk.log)" | tee -a $A; grep -E "CHECK failed|FAIL" /tmp/tk.log | head -5 >> $A
db_packages qwen2.5-0.5b:q
db_st kbench
kp() { # round variant shape: the GEMM's median share of the tile peak, paired (-p 3)
  local r=$1 v=$2; shift 2; local bin=$R/build/kbench; [ $v = PIPE0 ] && bin=/tmp/p0/kbench; [ $v = PFA ] && bin=/tmp/pfa/kbench
  echo "r$r $v $*: $($bin -t 2 -s 0.2 -p 3 -v amx gemm $* 2>&1 | grep -oE 'median[^0-9]*[0-9.]+%' | grep -oE '[0-9.]+%' | tail -1 | tr -d %) %" >> $A; }
for round in 1 2; do
  for s in "int8 512 1152 896" "int8 512 9728 896" "int8 512 896 896" "int8 512 896 4864" "int8 512 3072 2048" "int8 512 2048 8192" "bf16 512 2048 2048"; do
    for v in PIPE0 PIPE1 PFA; do kp $round $v $s; done; done
  db_left 260 || break
done
db_st prof
for s in "int8 512 9728 896" "int8 512 1152 896" "int8 512 896 4864"; do
  for v in pr0 pr1; do echo "prof $v $s: $(/tmp/$v/kbench -t 2 -s 0.2 -p 1 -v amx gemm $s 2>&1 | grep -E 'amx_prof|median' | tr '\n' ' ')" >> $A; done; done
db_st pp512
pq() { echo "r$1 $2 q pp512: $(timeout 60 $3/tandem bench /tmp/tb/q.tdm -t 2 --tests pp512 --reps 2 2>/dev/null | grep -o '"tokens_per_s": [0-9.]*' | grep -o '[0-9.]*$') t/s" >> $A; }
for r in 1 2 3; do pq $r PIPE0 /tmp/p0; pq $r PIPE1 $R/build; pq $r PIPE1 $R/build; pq $r PIPE0 /tmp/p0; db_left 420 || break; done
python3 tools/abmed.py $A | tee -a $A
db_wait_models
db_st bench
db_left 470 && db_beside q qwen05b pp512,tg128 1
db_st done
