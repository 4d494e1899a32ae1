#!/bin/bash
# session 17, run 77: two AMX GEMM build options on Qwen's shapes, in-process A/B (kbench-ab), and
# in the engine (pp512, TANDEM_PROFILE=warm, a second tandem build with both options, interleaved).
# AMX_BSTAT: K in one chunk -> each panel's B reused from L1 over the task's row blocks, A streamed.
# AMX_INPLACE: A tiles read from the prepared rows (no pack pass) where the stride suits L1.
. tools/devbench.sh; db_init 77
db_st build
db_build build/tandem build/kbench || exit 1
db_build BUILD=build-x CFLAGS="-O2 -g -DAMX_BSTAT=1 -DAMX_INPLACE=1" build-x/tandem || exit 1
db_packages qwen2.5-0.5b:q llama-3.2-1b:l
db_st ab
for r in 1 2; do
  db_ab aa "" $r "1152 896" "9728 896"
  db_ab bs "-DAMX_BSTAT=1" $r "1152 896" "896 896" "9728 896"
  db_ab ip "-DAMX_INPLACE=1" $r "1152 896" "896 896" "896 4864"
  db_ab both "-DAMX_BSTAT=1 -DAMX_INPLACE=1" $r "1152 896" "896 896" "9728 896" "896 4864"
  db_ab bs512 "-DAMX_BSTAT=1 -DMB=512" $r "1152 896" "9728 896"
  db_left 300 || break
done
db_st engine
i=0
for b in build build-x build build-x build build-x; do i=$((i+1))
  TANDEM_PROFILE=warm timeout 80 $b/tandem bench /tmp/tb/q.tdm -t 2 --tests pp512 --reps 3 --ceilings \
    > $OUT/r77-prof-q-$i.json 2> /tmp/p.err
  grep "tandem profile: prefill" /tmp/p.err | sed "s/^/# $i $b /" >> $A
  python3 -c "import json;d=json.load(open('$OUT/r77-prof-q-$i.json'));c=d['ceilings'];print('# $i $b peaks int8', c['peak_gops']['amx_int8'], 'pp512', [t.get('useful_gops') for t in c['tests']])" >> $A 2>&1
  db_left 540 || break
done
python3 tools/abmed.py $A | tee -a $A
db_st done
