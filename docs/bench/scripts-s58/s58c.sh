#!/bin/sh
# session 58, call 3: the decode attention's key segments by the batch (cu_dec.cu: each row splits its own keys,
# at least 64 a segment, chunks of 256 with the running rescale; was: the context's capacity cut in segments of
# 256, most of them empty at short contexts) and the latent split over several blocks. The GPU tests (test_cuda_decode
# also with TANDEM_CUDA_DEC_SEGS=0: one segment a row); tg128 and e4000+96 of this build against the previous one
# (bin/tandem-old, call 2's) on the DeepSeek-V2-Lite shape (4 layers) and the Qwen3-30B-A3B shape (8 layers),
# interleaved, two rounds; then pp512 / tg128 beside llama.cpp's CUDA build on the DeepSeek-V2-Lite shape, two
# rounds. Carried: tmp/cuda58c.tar.xz, tmp/peer.tar.xz.
. tools/device-lib.sh
dev_init c.txt ${PK:-cuda58c}
el() { echo $(( $(date +%s) - T0 )); }
L=$R/tmp/llb; mkdir -p $L && tar -C $L -xJf tmp/peer.tar.xz
( dev_peer_build $L 12; echo "peer build rc $?" >> $L/b.log ) &
BP=$!
( PYTHONPATH=$L/gguf-py python3 tools/make_moe_gguf.py /tmp/tb/d-bf16.gguf 4 deepseek-v2-lite > $W/gguf.txt 2>&1 ) &
GP=$!
st tests
TM_CONF_MODELS=llama3,qwen3_moe dev_gpu_tests # (qwen3 and test_cuda left behind by the carry limit)
grep -E "^--|segment" $W/dec.txt | head -8 >> $A
st models
$B/tandem synth --like deepseek-v2-lite --layers 4 -o /tmp/tb/d > /dev/null 2>> $A
$B/tandem convert /tmp/tb/d -o /tmp/tb/d.tdm --threads 4 > $W/convert.txt 2>&1; tail -1 $W/convert.txt >> $A
rm -rf /tmp/tb/d
dev_moe_shape /tmp/tb 4; tail -1 $W/convert.txt >> $A; rm -rf /tmp/tb/q
st ab
for r in 1 2; do for m in d q; do for bin in tandem tandem-old; do
  timeout 60 $B/$bin bench /tmp/tb/$m.tdm -t 4 --tests tg128,e4000+96 --reps 3 --prefill cuda --decode cuda \
    --md $W/ab-$m-$bin-$r.md > /dev/null 2>> $W/bench.err
  echo "$m $bin round $r: $(grep -E '^\| (tg|e)' $W/ab-$m-$bin-$r.md | cut -d'|' -f2,4,5 | tr '\n' ' ')" >> $A
done; done; done
wait $GP; st "wait peer build"; wait $BP; tail -1 $L/b.log | cut -c1-200 >> $A
[ -x $L/llbench ] && timeout 120 $L/llbench quantize /tmp/tb/d-bf16.gguf /tmp/tb/d-q4_0.gguf q4_0 16 > $W/quant.txt 2>&1
rm -f /tmp/tb/d-bf16.gguf
for r in 1 2; do
  [ $(el) -lt 520 ] || break
  timeout 60 $B/tandem bench /tmp/tb/d.tdm -t 4 --tests pp512,tg128 --reps 3 --prefill cuda --decode cuda \
    --peer llama.cpp --peer-model /tmp/tb/d-q4_0.gguf --peer-bin $L/llbench --md $W/peer$r.md > $W/peer$r.json 2>> $W/bench.err
  echo "-- round $r: tandem int4 vs llama.cpp Q4_0, both CUDA" >> $A; grep -E '^\| ' $W/peer$r.md >> $A
done
grep -iE "error|dropped|fail" $W/bench.err | head -10 | cut -c1-250 >> $A
cd $W && tar -czf $OUT/c.tar.gz ab-*.md peer*.md dec.txt conf.txt cuda.txt moe.txt 2>/dev/null
st done
