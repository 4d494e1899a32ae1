#!/bin/sh
# Session 61, call 2 (PK=cuda61: HEAD with scripts-s60/dec-mma-pv.diff applied, bin/tandem and test_engine_conf only,
# all seven conformance models, their residual and one-token logits left out to fit the carry): test_engine_conf's
# CUDA runs over every conformance model (the device calls before carried two or three, where one top-1 flip at a
# reference margin of 1.2e-4 is 1/36 of the rows), then the grouped decode attention with P·V on tensor cores
# (TANDEM_CUDA_DEC_MMA=1, the default) against the kernel a block a query head (=0), the same binary, interleaved,
# two rounds, on the DeepSeek-V2-Lite shape (4 layers) and the Llama-3.2-1B shape: tg128, e4000+96, e16000+64; then,
# where llama.cpp's CUDA build (started first, in the background) is done in time, the DeepSeek shape's pp512 and
# tg128 beside its Q4_0 in one invocation. Carried: tmp/peer.tar.xz, tmp/cuda61.tar.xz (built by /work/mkpk.sh with SLIM=1 BINS="build-cu/tandem build-cu/tests/test_engine_conf"
# MODELS="llama3 qwen2 qwen3 mistral gemma2 phi3 qwen3_moe").
. tools/device-lib.sh
dev_init d.txt ${PK:-cuda61}
[ -n "$NOPEER" ] || dev_peer_start 14 4 deepseek-v2-lite /tmp/tb/d-bf16.gguf
st conf
( TM_CONF_MODELS=llama3,qwen2,qwen3,mistral,gemma2,phi3,qwen3_moe TM_CONF_ENGINE=cuda timeout 300 $B/test_engine_conf ) \
    > $W/conf.txt 2>&1
grep -E "CHECK|passed|positions" $W/conf.txt | grep -v fixture | head -40 >> $A
st models
dev_dec_shapes
st ab
for r in $(seq 1 ${ROUNDS:-2}); do for m in d l; do for k in 1 0; do
  TANDEM_CUDA_DEC_MMA=$k timeout 60 $B/tandem bench /tmp/tb/$m.tdm -t 4 --tests tg128,e4000+96,e16000+64 --reps 3 \
    --prefill cuda --decode cuda --md $W/ab-$m-$k-$r.md > /dev/null 2>> $W/bench.err
  echo "$m mma=$k round $r: $(grep -E '^\| (tg|e)' $W/ab-$m-$k-$r.md | cut -d'|' -f2,4,5 | tr '\n' ' ')" >> $A
done; done; done
cd $W && tar -czf $OUT/d.tar.gz ab-*.md conf.txt 2>/dev/null; cd $R
if [ -z "$NOPEER" ]; then dev_peer_tail ${PEER_BY:-420} d
else grep -iE "error|fail" $W/bench.err | head -6 | cut -c1-250 >> $A; st done; fi
