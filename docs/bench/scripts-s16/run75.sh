#!/bin/bash
# session 16, run 75: the A/A control of run 74's method (kbench-ab with no option: the same code
# built twice, 5 rounds, weights over 128 MB), and pp512 with TANDEM_PROFILE=1's rates by matmul
# and row count beside the tile peak of --ceilings (Qwen, Llama).
. tools/devbench.sh; db_init 75
db_st build
db_build build/tandem build/kbench || exit 1
db_build kbench-ab "AMX_ALT=-DAMX_PG=4" || exit 1
db_packages qwen2.5-0.5b:q llama-3.2-1b:l
db_st aa
for s in "1152 896" "896 4864" "2048 2048" "2048 8192"; do
  o=$(build/kbench-ab -a 1 -t 2 -s 0.2 -p 5 -m 128 -v amx gemm int8 512 $s 2>&1)
  echo "r1 aa 512 $s: $(echo "$o" | grep -oE 'shipped: median [0-9.]+x' | grep -oE '[0-9.]+x' | tr -d x) x $(echo "$o" | grep -oE 'range [0-9.-]+\)' | tail -1)" >> $A
done
db_st prof
for m in q l; do
  TANDEM_PROFILE=1 timeout 100 build/tandem bench /tmp/tb/$m.tdm -t 2 --tests pp512 --reps 3 --ceilings \
    > $OUT/r75-prof-$m.json 2> /tmp/p.err
  grep "tandem profile: prefill" /tmp/p.err | sed "s/^/# $m /" >> $A
  python3 -c "import json;d=json.load(open('$OUT/r75-prof-$m.json'));c=d['ceilings'];print('# $m peaks int8', c['peak_gops']['amx_int8'], 'pp512', [t.get('useful_gops') for t in c['tests']])" >> $A 2>&1
  db_left 230 || break
done
db_st done
