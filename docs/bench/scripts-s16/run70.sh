#!/bin/bash
# session 16, run 70: the GEMMs inside the engine (TANDEM_PROFILE=1's rate by matmul shape, beside the
# int8 tile peak of --ceilings in the same invocation) against kbench's paired shares of the same
# shapes, with one warm weight and with weights cycled from memory (-m 256).
. tools/devbench.sh; db_init 70
db_st build
db_build build/tandem build/kbench || exit 1
db_packages qwen2.5-0.5b:q llama-3.2-1b:l
db_st profile
prof() { TANDEM_PROFILE=1 timeout 150 build/tandem bench /tmp/tb/$1.tdm -t 2 --tests pp512 --reps 3 --ceilings \
    > $OUT/r70-prof-$1-$2.json 2> $OUT/r70-prof-$1-$2.err
  grep "tandem profile: prefill" $OUT/r70-prof-$1-$2.err | sed "s/^/r$2 $1 /" >> $A
  python3 -c "import json;d=json.load(open('$OUT/r70-prof-$1-$2.json'));c=d['ceilings'];print('r$2 $1 peaks int8', c['peak_gops']['amx_int8'], 'pp512', [t.get('useful_gops') for t in c['tests']])" >> $A 2>&1; }
for r in 1 2; do prof q $r; prof l $r; done
db_st kbench
kp() { local r=$1 m=$2; shift 2
  echo "r$r m$m $*: $(build/kbench -t 2 -s 0.2 -p 3 -m $m -v amx gemm $* 2>&1 | grep -oE 'median[^0-9]*[0-9.]+%' | grep -oE '[0-9.]+%' | tail -1 | tr -d %) %" >> $A; }
for r in 1 2; do
  for s in "int8 512 1152 896" "int8 512 896 896" "int8 512 9728 896" "int8 512 896 4864" \
           "int8 512 3072 2048" "int8 512 2048 2048" "int8 512 8192 2048" "int8 512 2048 8192"; do
    kp $r 0 $s; kp $r 256 $s; done
  db_left 480 || break
done
python3 tools/abmed.py $A | tee -a $A
db_st done
