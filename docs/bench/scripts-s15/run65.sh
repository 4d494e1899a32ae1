#!/bin/bash
# session 15, run 65: the AMX GEMM's tile products B-major (-DAMX_BMAJ=1: B, the operand streamed
# from L2, gets two products of slack for its next load instead of one), with and without the
# pipelined epilogue; amx_tileloop stream (one operand in L1, the other streamed, both orders);
# the core topology and the tile peak on 1 and 2 threads.
. tools/devbench.sh; db_init 65
db_st build
db_build build/tandem build/kbench build/libtandem.a || exit 1
db_build BUILD=/tmp/p0 CFLAGS="-O2 -g -DAMX_EPI_PIPE=0" /tmp/p0/tandem /tmp/p0/kbench || exit 1
db_build BUILD=/tmp/bm CFLAGS="-O2 -g -DAMX_BMAJ=1" /tmp/bm/tandem /tmp/bm/kbench || exit 1
db_build BUILD=/tmp/bm0 CFLAGS="-O2 -g -DAMX_BMAJ=1 -DAMX_EPI_PIPE=0" /tmp/bm0/kbench || exit 1
D=.devdeps; gcc -O2 -std=c11 -D_GNU_SOURCE -march=sapphirerapids -I$D/include -I$D/include/cjson -Isrc -Iinclude \
  tools/amx_tileloop.c build/libtandem.a -L$D/lib -Wl,-rpath,$R/$D/lib -lcjson -lpcre2-8 -lutf8proc -lmicrohttpd -lm -pthread \
  -o /tmp/amx_tileloop 2>&1 | tail -5 >> $A
lscpu -e >> $A
db_st peak
for t in 1 2; do echo "peak t$t: $(build/kbench -t $t peak 2>&1 | grep -E 'amx' | tr '\n' ' ')" >> $A; done
db_st tileloop
taskset -c 3 /tmp/amx_tileloop stream >> $A 2>&1
db_packages qwen2.5-0.5b:q
db_st kbench
kp() { # round variant shape: the GEMM's median share of the tile peak, paired (-p 3)
  local r=$1 v=$2; shift 2; local bin
  case $v in PIPE1) bin=$R/build/kbench;; PIPE0) bin=/tmp/p0/kbench;; BMAJ) bin=/tmp/bm/kbench;; BMAJ0) bin=/tmp/bm0/kbench;; esac
  echo "r$r $v $*: $($bin -t 2 -s 0.2 -p 3 -v amx gemm $* 2>&1 | grep -oE 'median[^0-9]*[0-9.]+%' | grep -oE '[0-9.]+%' | tail -1 | tr -d %) %" >> $A; }
for round in 1 2 3; do
  for s in "int8 512 1152 896" "int8 512 9728 896" "int8 512 896 896" "int8 512 896 4864" "int8 512 3072 2048" "int8 512 2048 8192" "bf16 512 2048 2048"; do
    for v in PIPE0 PIPE1 BMAJ BMAJ0; do kp $round $v $s; done; done
  db_left 300 || break
done
db_st pp512
pq() { echo "r$1 $2 q pp512: $(timeout 60 $3/tandem bench /tmp/tb/q.tdm -t 2 --tests pp512 --reps 2 2>/dev/null | grep -o '"tokens_per_s": [0-9.]*' | grep -o '[0-9.]*$') t/s" >> $A; }
for r in 1 2 3; do pq $r PIPE0 /tmp/p0; pq $r BMAJ /tmp/bm; pq $r PIPE1 $R/build; pq $r BMAJ /tmp/bm; pq $r PIPE0 /tmp/p0; db_left 450 || break; done
python3 tools/abmed.py $A | tee -a $A
db_st done
