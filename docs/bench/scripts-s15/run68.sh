#!/bin/bash
# session 15, run 68: the AMX GEMM's K chunk of 16 steps (-DAMX_KB=16: A's chunk 32 KB, within L1,
# where 32 steps made it 64 KB for every K from 2048 int8) against 32 (HEAD), kbench -p shares on
# the default CPUs (tm_cpu_pick) and Llama pp512 interleaved; one thread against two; then HEAD
# beside llama.cpp (Qwen, Llama, Qwen).
. tools/devbench.sh; db_init 68
db_st build
db_peer_models qwen05b llama1b
db_build build/tandem build/kbench || exit 1
db_build BUILD=/tmp/kb16 CFLAGS="-O2 -g -DAMX_KB=16" /tmp/kb16/tandem /tmp/kb16/kbench || exit 1
db_packages qwen2.5-0.5b:q llama-3.2-1b:l
db_st kbench
kp() { local r=$1 v=$2 t=$3; shift 3; local bin=$R/build/kbench; [ $v = KB16 ] && bin=/tmp/kb16/kbench
  echo "r$r $v t$t $*: $($bin -t $t -s 0.2 -p 3 -v amx gemm $* 2>&1 | grep -oE 'median[^0-9]*[0-9.]+%' | grep -oE '[0-9.]+%' | tail -1 | tr -d %) %" >> $A; }
for round in 1 2; do
  for s in "int8 512 3072 2048" "int8 512 2048 2048" "int8 512 8192 2048" "int8 512 2048 8192" "int8 512 896 4864" "int8 512 9728 896"; do
    for v in KB32 KB16; do kp $round $v 2 $s; done; done
  kp $round KB32 1 int8 512 9728 896; kp $round KB32 1 int8 512 3072 2048
  db_left 200 || break
done
db_st pp512
pl() { echo "r$1 $2 l pp512: $(timeout 60 $3/tandem bench /tmp/tb/l.tdm -t 2 --tests pp512 --reps 2 2>/dev/null | grep -o '"tokens_per_s": [0-9.]*' | grep -o '[0-9.]*$') t/s" >> $A; }
for r in 1 2; do pl $r KB32 $R/build; pl $r KB16 /tmp/kb16; pl $r KB16 /tmp/kb16; pl $r KB32 $R/build; db_left 260 || break; done
python3 tools/abmed.py $A | tee -a $A
db_wait_models
db_st bench
db_beside q qwen05b pp512,tg128 1
db_left 420 && db_beside l llama1b pp512,tg128 1
db_left 430 && db_beside q qwen05b pp512,tg128 2
grep -h "beside" $A
db_st done
