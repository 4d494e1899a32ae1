#!/bin/bash
# session 13, run 53: the kernel, KV cache and engine tests on the AMX Xeon (the new int4 GEMV and
# the KV prefault on that CPU and kernel); no conformance models carried
R=$(pwd); OUT=${OUT:-/tmp/out}; mkdir -p $OUT; A=$OUT/all53.txt
export LD_LIBRARY_PATH=$R/.devdeps/lib
sh .devdeps/build.sh build/tests/test_kernels build/tests/test_kvcache build/tests/test_engine build/tests/test_threadpool build/tandem > /tmp/build.log 2>&1 || { tail -30 /tmp/build.log | tee -a $A; exit 1; }
build/tandem devices 2>&1 | head -12 >> $A
uname -r >> $A
for t in test_kernels test_kvcache test_engine test_threadpool; do timeout 240 build/tests/$t > /tmp/$t.log 2>&1; echo "$t rc $?: $(tail -1 /tmp/$t.log)" >> $A; grep -iE "fail|skip|note" /tmp/$t.log | head -5 >> $A; done
