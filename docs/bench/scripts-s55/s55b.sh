#!/bin/sh
# session 55, call 2: the tiled MoE path beside llama.cpp's CUDA build (Q4_0 of the same Qwen3-30B-A3B shape cut to
# 8 layers, tools/make_moe_gguf.py), three rounds of pp512 / tg128 in one invocation each, a profiled pp512
# (TANDEM_CUDA_PROFILE=1); and a measurement build (bin2/: cu_moe_mm with two shared-memory buffers,
# -DCU_MOE_MM_STAGES=2): its test_cuda_moe, and its pp512 after each round. Carried: tmp/cuda55b.tar.xz (bin/,
# bin2/, lib/, shared/), tmp/peer.tar.xz. (Rewritten over tools/device-lib.sh after the call: the same commands.)
. tools/device-lib.sh
dev_init a.txt ${PK:-cuda55b}
L=$R/tmp/llb; mkdir -p $L && tar -C $L -xJf tmp/peer.tar.xz
el() { echo $(( $(date +%s) - T0 )); }
( dev_peer_build $L 14; echo "peer build rc $?" >> $L/b.log ) &
BP=$!
dev_moe_shape /tmp/tb 4 &
SP=$!
( PYTHONPATH=$L/gguf-py python3 $R/tools/make_moe_gguf.py /tmp/tb/q-bf16.gguf 8 > $W/gguf.txt 2>&1 ) &
GP=$!
( timeout 150 $B/test_cuda_moe ) > $W/moe.txt 2>&1; echo "bin (1 stage): $(grep -E 'CHECK|passed' $W/moe.txt | tr '\n' ' ')" >> $A
( timeout 150 $P/bin2/test_cuda_moe ) > $W/moe2.txt 2>&1; echo "bin2 (2 stages): $(grep -E 'cu_moe_mm|passed' $W/moe2.txt | tr '\n' ' ')" >> $A
wait $SP; st "converted"; tail -1 $W/convert.txt >> $A
TANDEM_CUDA_PROFILE=1 timeout 60 $B/tandem bench /tmp/tb/q.tdm -t 4 --tests pp512 --reps 2 --prefill cuda \
    --decode cuda > /dev/null 2> $W/prof.txt; grep "cuda profile" $W/prof.txt | cut -c1-600 >> $A
wait $GP; st "wait peer build"; wait $BP; tail -1 $L/b.log | cut -c1-200 >> $A
st quantize
[ -x $L/llbench ] && timeout 120 $L/llbench quantize /tmp/tb/q-bf16.gguf /tmp/tb/q-q4_0.gguf q4_0 16 > $W/quant.txt 2>&1
rm -f /tmp/tb/q-bf16.gguf
st peer
for r in 1 2 3; do
  [ -f /tmp/tb/q-q4_0.gguf ] && [ $(el) -lt 480 ] || break
  timeout 75 $B/tandem bench /tmp/tb/q.tdm -t 4 --tests pp512,tg128 --reps 3 --prefill cuda --decode cuda \
    --peer llama.cpp --peer-model /tmp/tb/q-q4_0.gguf --peer-bin $L/llbench --md $W/peer$r.md > $W/peer$r.json 2>> $W/bench.err
  echo "-- round $r: tandem int4 vs llama.cpp Q4_0, both CUDA" >> $A; grep -E '^\| ' $W/peer$r.md >> $A
  timeout 60 $P/bin2/tandem bench /tmp/tb/q.tdm -t 4 --tests pp512 --reps 3 --prefill cuda --decode cuda \
    --md $W/v$r.md > /dev/null 2>> $W/bench.err; echo "bin2 (2 stages) round $r: $(grep -E '^\| pp' $W/v$r.md | cut -d'|' -f2,4)" >> $A
done
grep -iE "error|dropped|fail" $W/bench.err | head -10 | cut -c1-250 >> $A
cp $W/*.md $W/*.json $W/prof.txt $OUT/ 2>/dev/null
st done
