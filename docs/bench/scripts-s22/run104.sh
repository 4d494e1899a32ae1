# session 22, run 104: amx_tileloop ystore (what a K = 896 block's output costs the tile loop)
. tools/devbench.sh; db_init 104
cat /sys/kernel/mm/transparent_hugepage/enabled >> $A
db_st build
db_build build/libtandem.a || exit 1
D=$R/.devdeps
gcc -O2 -std=c11 -D_GNU_SOURCE -march=sapphirerapids -I$D/include -I$D/include/cjson -Isrc -Iinclude tools/amx_tileloop.c \
  build/libtandem.a -L$D/lib -lcjson -lpcre2-8 -lutf8proc -lmicrohttpd -lm -pthread -o /tmp/atl >> $A 2>&1 || exit 1
db_st one-thread-1152
taskset -c 1 /tmp/atl ystore 1152 >> $A 2>&1
db_st one-thread-9728
taskset -c 1 /tmp/atl ystore 9728 >> $A 2>&1
db_st two-threads-1152
taskset -c 1 /tmp/atl ystore 1152 > /tmp/c1.txt 2>&1 & taskset -c 2 /tmp/atl ystore 1152 > /tmp/c2.txt 2>&1; wait
sed 's/^/cpu1 /' /tmp/c1.txt >> $A; sed 's/^/cpu2 /' /tmp/c2.txt >> $A
db_st done
cat $A
