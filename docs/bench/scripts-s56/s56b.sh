#!/bin/sh
# session 56, call 2: the final build (bin/: the attention's residual pass writes the MoE layer's FFN norm in f32
# and bf16, one launch a layer fewer; the profile's categories now split out the mixture-of-experts block and
# the head) beside llama.cpp's CUDA build (Q4_0 of the same Qwen3-30B-A3B shape cut to 8 layers), three rounds
# of pp512 / tg128 in one invocation each (the build before was measured beside this one's code in call 1; the
# carry limit leaves it out here); its GPU tests; a decode
# step's profile launched one by one and the MoE phases (TANDEM_CUDA_MOE_TIMES=1); the decode GEMV alone on
# the shape's products (cu_gemv_bench). Carried: tmp/cuda56b.tar.xz, tmp/peer.tar.xz. (Rewritten over
# tools/device-lib.sh after the call: the same commands.)
. tools/device-lib.sh
dev_init a.txt ${PK:-cuda56b}
el() { echo $(( $(date +%s) - T0 )); }
dev_peer_start 12
dev_moe_shape /tmp/tb 4 &
SP=$!
st tests
dev_gpu_tests
st gemv
$B/cu_gemv_bench -b 1 -p 1 qkv:int4g64:5120:2048 o:int4g64:2048:4096 egu:int4g64:1536:2048:gated edn:int4g64:2048:768 \
    head4:int4g64:151936:2048 head8:int8:151936:2048 > $W/gemv.txt 2>&1; cut -c1-160 $W/gemv.txt | head -20 >> $A
wait $SP; st "converted"; tail -1 $W/convert.txt >> $A
$B/tandem inspect /tmp/tb/q.tdm 2>/dev/null | grep -iE "head|output\.|lm_head|decode.*enc" | head -5 | cut -c1-200 >> $A
pf() { env $3 timeout 60 $1/tandem bench /tmp/tb/q.tdm -t 4 --tests tg128 --reps 2 --prefill cuda \
    --decode cuda > /dev/null 2> $W/prof-$2.txt; echo "-- $2 $3:" >> $A; grep -E "cuda (profile|moe)" $W/prof-$2.txt | cut -c1-400 >> $A; }
pf $B 1by1 "TANDEM_CUDA_PROFILE=1 TANDEM_CUDA_GRAPHS=0"; pf $B moe "TANDEM_CUDA_MOE_TIMES=1 TANDEM_CUDA_GRAPHS=0"
dev_peer_q4
st peer
for r in 1 2 3; do
  [ -f /tmp/tb/q-q4_0.gguf ] && [ $(el) -lt 440 ] || break
  dev_peer_round $r
done
grep -iE "error|dropped|fail" $W/bench.err | head -10 | cut -c1-250 >> $A
cp $W/peer*.md $W/peer*.json $W/prof-*.txt $W/gemv.txt $OUT/ 2>/dev/null
st done
