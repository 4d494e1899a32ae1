#!/bin/bash
# session 14, run 62: the int4 GEMV at B = 1, 4, 8 on the Xeon: session 13's kernel (OLD, f87df70),
# its GFNI build (G52, 52934c5), the per-window scales with batch-invariant chains (NEW, working tree)
# and the same taking x rows 4 at a time (SP4, -DQ4_SPLIT=4)
R=$(pwd); OUT=${OUT:-/tmp/out}; mkdir -p $OUT; A=$OUT/all62.txt
export LD_LIBRARY_PATH=$R/.devdeps/lib
T0=$(date +%s); st() { echo "== $1 at $(( $(date +%s) - T0 )) s" | tee -a $A; }
D=$R/.devdeps; MK="make -j5 CC=\"gcc -I$D/include -I$D/include/cjson -L$D/lib -Wl,-rpath,$D/lib\""
st build
( sh .devdeps/build.sh build/kbench > /tmp/b1.log 2>&1; sh .devdeps/build.sh BUILD=/tmp/sp4 CFLAGS="-O2 -g -DQ4_SPLIT=4" /tmp/sp4/kbench > /tmp/b4.log 2>&1 ) &
( cd .devdeps/s14base && make -j5 CC="gcc -I$D/include -I$D/include/cjson -L$D/lib -Wl,-rpath,$D/lib" build/kbench > /tmp/b2.log 2>&1 ) &
( cd .devdeps/g52 && make -j5 CC="gcc -I$D/include -I$D/include/cjson -L$D/lib -Wl,-rpath,$D/lib" build/kbench > /tmp/b3.log 2>&1 ) &
wait; ls -la /tmp/sp4/kbench build/kbench .devdeps/s14base/build/kbench .devdeps/g52/build/kbench >> $A 2>&1
st kbench
kb() { local r=$1 v=$2; shift 2; local bin=$R/build/kbench
  [ $v = OLD ] && bin=$D/s14base/build/kbench; [ $v = G52 ] && bin=$D/g52/build/kbench; [ $v = SP4 ] && bin=/tmp/sp4/kbench
  echo "r$r $v $*: $($bin -t 2 -s 0.3 -v avx512 gemv $* 2>&1 | head -1 | grep -o '[0-9.]* GB/s')" >> $A; }
for round in 1 2 3; do
  echo "r$round memread $($R/build/kbench -t 2 -s 0.5 mem 2>&1 | tail -1)" >> $A
  for s in "int4g64 1152 896 1" "int4g64 896 4864 1" "int4g64 9728 896 1" "int4g64 9728 896 4" "int4g64 9728 896 8" "int4g64 896 4864 8"; do
    for v in OLD G52 NEW SP4; do kb $round $v $s; done; done
  [ $(( $(date +%s) - T0 )) -gt 300 ] && break
done
python3 tools/abmed.py $A | tee -a $A
st done
