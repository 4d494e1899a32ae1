#!/bin/sh
# Session 59, call 2 (PK=cuda59b: the build committed, the grouped kernel then on by default). With
# dec-mma-merge.diff applied (beside this script) and packed as PK=cuda59c, with NCU_BY=190 PEER_BY=262, it is also
# the fuller form of the prepared call 3 (s59c.sh, the short one). Call 2: the decode attention of a kv head's query heads together, the scores on tensor cores
# (k_attn_dec_mma, cu_dec.cu), against the kernel a block a query head (TANDEM_CUDA_DEC_MMA=0, the same binary).
# The GPU tests (test_cuda_decode runs both kernels); tg128 and e4000+96 of both, interleaved, two rounds, on the
# DeepSeek-V2-Lite shape (4 layers: one latent kv head of 576 dims, 16 query heads) and the Llama-3.2-1B shape
# (GQA 32/8, head dim 64); ncu of a tg16 step (DeepSeek shape); then, where llama.cpp's CUDA build is done in time,
# the DeepSeek shape beside it. Carried: tmp/cuda59b.tar.xz, tmp/peer.tar.xz.
. tools/device-lib.sh
dev_init d.txt ${PK:-cuda59b}
dev_peer_start 14 4 deepseek-v2-lite /tmp/tb/d-bf16.gguf
st tests
TM_CONF_MODELS=llama3,qwen3_moe; export TM_CONF_MODELS
dev_gpu_tests
grep -E "^--" $W/dec.txt | head -5 >> $A
st models
dev_dec_shapes
st ab
for r in 1 2; do for m in d l; do for k in 1 0; do
  TANDEM_CUDA_DEC_MMA=$k timeout 40 $B/tandem bench /tmp/tb/$m.tdm -t 4 --tests tg128,e4000+96 --reps 3 --prefill cuda \
    --decode cuda --md $W/ab-$m-$k-$r.md > /dev/null 2>> $W/bench.err
  echo "$m mma=$k round $r: $(grep -E '^\| (tg|e)' $W/ab-$m-$k-$r.md | cut -d'|' -f2,4,5 | tr '\n' ' ')" >> $A
done; done; done
dev_ncu_tg ${NCU_BY:-999}
cd $W && tar -czf $OUT/d.tar.gz ab-*.md dec.txt cuda.txt conf.txt moe.txt 2>/dev/null; cd $R
dev_peer_tail ${PEER_BY:-330} d
