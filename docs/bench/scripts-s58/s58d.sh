#!/bin/sh
# Prepared in session 58 and NOT run there (the session's device time ran out: two starts failed). To run: apply
# dec-segs.diff (beside this script) to the tree, build the CUDA binaries, pack them as tmp/cuda58c.tar.xz with the
# build without the diff as bin/tandem-old (the attention as committed), carry that and tmp/peer.tar.xz.
# The call: the decode attention's key segments by the batch
# (cu_dec.cu: each row splits its own keys, at least 64 a segment, chunks of 256 with the running rescale; was: the
# context's capacity cut in segments of 256, most of them empty at short contexts) and the latent split over
# several blocks. The GPU tests (test_cuda_decode also with TANDEM_CUDA_DEC_SEGS=0: one segment a row); tg128 and
# e4000+96 of this build against the previous one (bin/tandem-old, call 2's) on the DeepSeek-V2-Lite shape (4 layers),
# interleaved, two rounds; then, where llama.cpp's CUDA build is done in time, one round beside it. Carried:
# tmp/cuda58c.tar.xz, tmp/peer.tar.xz.
. tools/device-lib.sh
dev_init c.txt ${PK:-cuda58c}
el() { echo $(( $(date +%s) - T0 )); }
dev_peer_start 12 4 deepseek-v2-lite /tmp/tb/d-bf16.gguf
st tests
TM_CONF_MODELS=llama3,qwen3_moe dev_gpu_tests
grep -E "^--" $W/dec.txt | head -4 >> $A
st model
$B/tandem synth --like deepseek-v2-lite --layers 4 -o /tmp/tb/d > /dev/null 2>> $A
$B/tandem convert /tmp/tb/d -o /tmp/tb/d.tdm --threads 4 > $W/convert.txt 2>&1; tail -1 $W/convert.txt >> $A
rm -rf /tmp/tb/d
st ab
for r in 1 2; do for bin in tandem tandem-old; do
  timeout 40 $B/$bin bench /tmp/tb/d.tdm -t 4 --tests tg128,e4000+96 --reps 3 --prefill cuda --decode cuda \
    --md $W/ab-$bin-$r.md > /dev/null 2>> $W/bench.err
  echo "$bin round $r: $(grep -E '^\| (tg|e)' $W/ab-$bin-$r.md | cut -d'|' -f2,4,5 | tr '\n' ' ')" >> $A
done; done
cd $W && tar -czf $OUT/c.tar.gz ab-*.md dec.txt conf.txt moe.txt 2>/dev/null; cd $R
while [ $(el) -lt 220 ] && kill -0 $BP 2>/dev/null; do sleep 5; done
st "peer build"; tail -1 $L/b.log | cut -c1-200 >> $A
if [ -x $L/llbench ] && [ $(el) -lt 230 ]; then
  timeout 40 $L/llbench quantize /tmp/tb/d-bf16.gguf /tmp/tb/d-q4_0.gguf q4_0 16 > $W/quant.txt 2>&1
  timeout 45 $B/tandem bench /tmp/tb/d.tdm -t 4 --tests pp512,tg128 --reps 3 --prefill cuda --decode cuda \
    --peer llama.cpp --peer-model /tmp/tb/d-q4_0.gguf --peer-bin $L/llbench --md $W/peer1.md > /dev/null 2>> $W/bench.err
  echo "-- tandem int4 vs llama.cpp Q4_0, both CUDA" >> $A; grep -E '^\| ' $W/peer1.md >> $A
fi
grep -iE "error|fail" $W/bench.err | head -6 | cut -c1-250 >> $A
st done
