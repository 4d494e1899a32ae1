#!/bin/bash
# session 9: GEMV rows in guided tasks (kdispatch.c) against fixed tasks (kdispatch_s8.c),
# tg128 interleaved on both shapes. Run: bash .devdeps/run32.sh (carry .devdeps)
R=$(pwd); OUT=${OUT:-/tmp/out}; mkdir -p $OUT; A=$OUT/all32.txt
export LD_LIBRARY_PATH=$R/.devdeps/lib
T0=$(date +%s); st() { echo "== $1 at $(( $(date +%s) - T0 )) s" | tee -a $A; }
st build
sh .devdeps/build.sh build/tandem build/libtandem.a > /tmp/build.log 2>&1 || { tail -40 /tmp/build.log; exit 1; }
CB="-O2 -g -std=c11 -D_GNU_SOURCE -Isrc -Iinclude -Ibuild/gen -I.devdeps/include -I.devdeps/include/cjson"
LL="-L.devdeps/lib -lcjson -lpcre2-8 -lutf8proc -lmicrohttpd -lm -pthread"
gcc $CB -c .devdeps/kdispatch_s8.c -o /tmp/kd_old.o 2>> $A
gcc -o /tmp/td_old build/obj/src/cli/*.o /tmp/kd_old.o build/libtandem.a $LL 2>> $A; cp build/tandem /tmp/td_new
mkdir -p /tmp/tb
for m in "llama1b llama-3.2-1b" "qwen05b qwen2.5-0.5b"; do set -- $m
( build/tandem synth --like $2 -o /tmp/tb/$1 > /dev/null 2>> $A
  build/tandem convert /tmp/tb/$1 -o /tmp/tb/$1.tdm --threads 4 > /dev/null 2>> $A ) &
done
wait
st tg
for round in 1 2 3 4 5; do for m in qwen05b llama1b; do for v in old new; do
  x=$(timeout 40 /tmp/td_$v bench /tmp/tb/$m.tdm -t 2 --tests tg128 --reps 2 2>/dev/null | grep -o '"tokens_per_s": [0-9.]*' | grep -o '[0-9.]*$')
  echo "tg128 round $round $m $v $x" >> $A
done; done; done
st done
