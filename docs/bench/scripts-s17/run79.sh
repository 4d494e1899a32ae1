#!/bin/bash
# session 17, run 79: the shipped code (A tiles in place for K = 896) beside llama.cpp, two invocations
# per model in turn; pp512 with TANDEM_PROFILE=warm (the GEMMs' shares inside the engine), interleaved
# with a build packing every GEMM's x (-DAMX_INPLACE=0); a fresh process's first 500-token prompt with
# huge pages on and off (TANDEM_HUGEPAGES=0).
. tools/devbench.sh; db_init 79
db_st build
db_peer_models llama1b qwen05b
db_build build/tandem || exit 1
db_build BUILD=build-x CFLAGS="-O2 -g -DAMX_INPLACE=0" build-x/tandem || exit 1
db_packages llama-3.2-1b:l qwen2.5-0.5b:q
db_st prof
i=0
for v in q:build q:build-x l:build q:build-x q:build l:build; do i=$((i+1)); m=${v%%:*}; b=${v##*:}
  TANDEM_PROFILE=warm timeout 80 $b/tandem bench /tmp/tb/$m.tdm -t 2 --tests pp512 --reps 3 --ceilings \
    > $OUT/r79-prof-$m-$i.json 2> /tmp/p.err
  grep "tandem profile: prefill" /tmp/p.err | sed "s/^/# $i $m $b /" >> $A
  python3 -c "import json;d=json.load(open('$OUT/r79-prof-$m-$i.json'));c=d['ceilings'];print('# $i $m $b peaks int8', c['peak_gops']['amx_int8'], 'pp512', [t.get('useful_gops') for t in c['tests']])" >> $A 2>&1
done
db_st ttft
python3 -c "print(' '.join(['The quick brown fox jumps over the lazy dog near the river bank.'] * 38))" > /tmp/p500.txt
for r in 1 2 3; do
  for hp in 1 0; do
    TANDEM_HUGEPAGES=$hp timeout 60 build/tandem run /tmp/tb/q.tdm -f /tmp/p500.txt -n 1 -t 2 2> /tmp/r.err > /dev/null
    echo "r$r hp$hp qwen first prompt: $(grep -oE 'prompt: [0-9]+ tokens in [0-9.]+ s' /tmp/r.err | grep -oE '[0-9.]+ s$')" >> $A
    grep -oE 'prompt: [0-9]+ tokens' /tmp/r.err | head -1 | sed 's/^/# /' >> $A
  done
done
db_wait_models
db_st bench
db_beside q qwen05b pp512,tg128 1
db_left 430 && db_beside l llama1b pp512,tg128 1
db_left 480 && db_beside q qwen05b pp512,tg128 2
db_left 530 && db_beside l llama1b pp512,tg128 2
grep -h "beside" $A
python3 tools/abmed.py $A | tee -a $A
db_st done
