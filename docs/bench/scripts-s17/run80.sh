#!/bin/bash
# session 17, run 80: the session's code (A tiles in place for K = 896; q, k, v from the projection to
# the KV cache in one pass) beside llama.cpp, Qwen then Llama, then pp512 with TANDEM_PROFILE=warm,
# Qwen and Llama in turn, for the GEMMs' shares of the tile peak inside the engine (the peak read
# before and after each invocation swung up to 2x on run 79's host: several invocations, medians).
. tools/devbench.sh; db_init 80
db_st build
db_peer_models qwen05b llama1b
db_build build/tandem || exit 1
db_packages qwen2.5-0.5b:q llama-3.2-1b:l
db_st prof
i=0
for m in q l q l q l q l; do i=$((i+1))
  db_left 170 || break
  TANDEM_PROFILE=warm timeout 60 build/tandem bench /tmp/tb/$m.tdm -t 2 --tests pp512 --reps 3 --ceilings \
    > /tmp/prof.json 2> /tmp/p.err
  grep "tandem profile: prefill" /tmp/p.err | sed "s/^/# $i $m /" >> $A
  python3 -c "import json;d=json.load(open('/tmp/prof.json'));c=d['ceilings'];print('# $i $m peaks int8', c['peak_gops']['amx_int8'], 'pp512', [t.get('useful_gops') for t in c['tests']])" >> $A 2>&1
done
db_wait_models
db_st bench
db_beside q qwen05b pp512,tg128 1
db_left 300 && db_beside l llama1b pp512,tg128 1
grep -h "beside" $A
db_st done
