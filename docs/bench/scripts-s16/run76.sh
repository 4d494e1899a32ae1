#!/bin/bash
# session 16, run 76: pp512 with TANDEM_PROFILE=warm (the bench's warm-up call left out of the
# profile) beside the tile peak of --ceilings: the GEMMs' shares inside the engine, by shape.
. tools/devbench.sh; db_init 76
db_st build
db_build build/tandem || exit 1
db_packages qwen2.5-0.5b:q llama-3.2-1b:l
db_st prof
i=0
for m in q l q l; do i=$((i+1))
  TANDEM_PROFILE=warm timeout 80 build/tandem bench /tmp/tb/$m.tdm -t 2 --tests pp512 --reps 3 --ceilings \
    > $OUT/r76-prof-$m-$i.json 2> /tmp/p.err
  grep "tandem profile: prefill" /tmp/p.err | sed "s/^/# $i $m /" >> $A
  python3 -c "import json;d=json.load(open('$OUT/r76-prof-$m-$i.json'));c=d['ceilings'];print('# $i $m peaks int8', c['peak_gops']['amx_int8'], 'pp512', [t.get('useful_gops') for t in c['tests']])" >> $A 2>&1
  db_left 120 || break
done
db_st done
