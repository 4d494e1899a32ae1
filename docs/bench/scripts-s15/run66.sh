#!/bin/bash
# session 15, run 66: which vCPUs share a physical core (and its AMX unit and L1/L2)? Two
# one-thread tile peaks at once on cpu 0 and cpu k; kbench -t 2 peak and GEMM shares on cpus
# (0,1) against (1,2) and (0+8..); amx_tileloop's L1 loop on two cpus at once.
. tools/devbench.sh; db_init 66
db_build build/kbench build/libtandem.a || exit 1
D=.devdeps; gcc -O2 -std=c11 -D_GNU_SOURCE -march=sapphirerapids -I$D/include -I$D/include/cjson -Isrc -Iinclude \
  tools/amx_tileloop.c build/libtandem.a -L$D/lib -Wl,-rpath,$R/$D/lib -lcjson -lpcre2-8 -lutf8proc -lmicrohttpd -lm -pthread \
  -o /tmp/amx_tileloop 2>&1 | tail -5 >> $A
pk() { build/kbench -t 1 -c $1 -s 0.5 peak 2>&1 | grep -oE 'amx int8, 1 threads: [0-9.]+' | grep -oE '[0-9.]+$'; }
db_st pairs
for r in 1 2; do
  echo "r$r alone c0: $(pk 0) GOP/s" >> $A
  for k in 1 2 3 4 7 8 9 15; do
    pk 0 > /tmp/a.txt & pk $k > /tmp/b.txt; wait
    echo "r$r pair 0+$k: $(cat /tmp/a.txt) $(cat /tmp/b.txt) GOP/s" >> $A
  done
done
db_st t2
for r in 1 2 3; do
  for c in 0 1 2 8; do
    echo "r$r c$c peak2: $(build/kbench -t 2 -c $c -s 0.5 peak 2>&1 | grep -oE 'amx int8, 2 threads: [0-9.]+' | grep -oE '[0-9.]+$') GOP/s" >> $A
    echo "r$r c$c gemm 9728x896: $(build/kbench -t 2 -c $c -s 0.2 -p 3 -v amx gemm int8 512 9728 896 2>&1 | grep -oE 'median [0-9.]+ GFLOP/s' | grep -oE '[0-9.]+') GFLOP/s" >> $A
  done
done
db_st tileloop
for k in 1 8; do
  taskset -c 0 /tmp/amx_tileloop > /tmp/t0.txt 2>&1 & taskset -c $k /tmp/amx_tileloop > /tmp/tk.txt 2>&1; wait
  echo "tileloop pair 0+$k:" >> $A; grep -E "16 KB|256 KB" /tmp/t0.txt | sed 's/^/  cpu0 /' >> $A; grep -E "16 KB|256 KB" /tmp/tk.txt | sed "s/^/  cpu$k /" >> $A
done
taskset -c 0 /tmp/amx_tileloop > /tmp/t0.txt 2>&1; echo "tileloop alone:" >> $A; grep -E "16 KB|256 KB" /tmp/t0.txt | sed 's/^/  cpu0 /' >> $A
python3 tools/abmed.py $A | tee -a $A
db_st done
