#!/bin/bash
# session 38, run 146 (h200-host Xeon): the runtime tests on the real tiles after the prefix cache
# across requests (shared KV pages; the AMX prefill then starts at a page boundary past a shared
# prefix) and the logprobs: kvcache, sampler, scheduler (every route, the cache, logprobs against
# the route's logits), server, and the engine tests with the conformance models carried.
. tools/devbench.sh; db_init 146
mkdir -p /tmp/sh && tar xJf tmp/conf.tar.xz -C /tmp/sh && export TM_SHARED=/tmp/sh/shared
db_st build
db_build build/tandem build/tests/test_kvcache build/tests/test_sampler build/tests/test_sched build/tests/test_serve \
    build/tests/test_engine build/tests/test_engine_conf || exit 1
build/tandem devices >> $A 2>&1
db_st tests
for t in test_kvcache test_sampler test_sched test_serve test_engine test_engine_conf; do
    db_left 540 || break
    timeout $(( 570 - ($(date +%s) - T0) )) build/tests/$t > /tmp/$t.log 2>&1; echo "$t rc=$?: $(tail -1 /tmp/$t.log)" >> $A
    grep -m8 -E "CHECK failed|cpu-amx.*(top-1|KL)" /tmp/$t.log >> $A
done
db_st done
cat $A
