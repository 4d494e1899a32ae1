#!/bin/bash
# session 14, run 59: tg128 of the session-13 build (OLD) and HEAD (NEW), alone, interleaved
R=$(pwd); OUT=${OUT:-/tmp/out}; mkdir -p $OUT; A=$OUT/all59.txt
export LD_LIBRARY_PATH=$R/.devdeps/lib
T0=$(date +%s); st() { echo "== $1 at $(( $(date +%s) - T0 )) s" | tee -a $A; }
NEW=$R/build; OLD=$R/.devdeps/s14base/build
if [ ! -x $NEW/tandem ] || [ ! -x $OLD/tandem ]; then
  sh .devdeps/build.sh build/tandem build/kbench > /tmp/build.log 2>&1 || exit 1
  D=$R/.devdeps; ( cd .devdeps/s14base && make -j16 CC="gcc -I$D/include -I$D/include/cjson -L$D/lib -Wl,-rpath,$D/lib" build/tandem build/kbench > /tmp/build0.log 2>&1 ) || exit 1
fi
mkdir -p /tmp/tb; ls /tmp/tb >> $A
for m in qwen2.5-0.5b:q llama-3.2-1b:l; do [ -f /tmp/tb/${m##*:}.tdm ] && continue; build/tandem synth --like ${m%%:*} -o /tmp/tb/${m##*:} > /dev/null
  build/tandem convert /tmp/tb/${m##*:} -o /tmp/tb/${m##*:}.tdm --threads 8 > /dev/null 2>> $A; rm -rf /tmp/tb/${m##*:}; done
st ab
t() { echo "r$1 $2 $3 tg128: $(timeout 100 $4/tandem bench /tmp/tb/$3.tdm -t 2 --tests tg128 --reps 3 2>/dev/null | grep -o '"tokens_per_s": [0-9.]*' | grep -o '[0-9.]*$') t/s" >> $A; }
for r in 1 2 3 4; do
  echo "r$r memread $($NEW/kbench -t 2 -s 0.5 mem 2>&1 | tail -1)" >> $A
  t $r OLD q $OLD; t $r NEW q $NEW; t $r NEW q $NEW; t $r OLD q $OLD
  [ $r -le 2 ] && { t $r NEW l $NEW; t $r OLD l $OLD; }
  [ $(( $(date +%s) - T0 )) -gt 420 ] && break
done
python3 tools/abmed.py $A | tee -a $A
st done
