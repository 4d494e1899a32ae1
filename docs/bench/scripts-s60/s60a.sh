#!/bin/sh
# Session 60, call 1 (PK=cuda60b: dec-mma-pv.diff applied and built; tandem-old: scripts-s59/dec-mma-merge.diff): the grouped decode attention (k_attn_dec_mma, cu_dec.cu) with P·V on tensor cores
# (bin/tandem) and session 59's merge fix alone, P·V on CUDA cores (bin/tandem-old, dec-mma-merge.diff), both on by
# default, against the kernel a block a query head (TANDEM_CUDA_DEC_MMA=0). The GPU tests of the P·V build
# (test_cuda_decode runs both kernels); tg128 and e4000+96 of the three, interleaved, two rounds, on the
# DeepSeek-V2-Lite shape (4 layers: one latent kv head of 576 dims, 16 query heads) and the Llama-3.2-1B shape
# (GQA 32/8, head dim 64); ncu of a tg16 step (DeepSeek shape, P·V build); then, where llama.cpp's CUDA build is
# done in time (and NOPEER is unset), the DeepSeek shape beside it. Carried: tmp/cuda60b.tar.xz, tmp/peer.tar.xz.
# Written in session 60 (no device machine could be started then); run as session 61's call 1 with NOPEER=1 ROUNDS=2
# (docs/bench/gpu-s61/call1; dec-mma-pv.diff is in the tree since). To rebuild its package where tmp/cuda60b.tar.xz is gone: build-cu with scripts-s59/dec-mma-merge.diff
# applied, copy build-cu/tandem aside, then with dec-mma-pv.diff instead (it holds both changes), and
# `OLD=<the copy> MODELS="llama3 qwen3_moe" EXTRA= sh /work/mkpk.sh cuda60b` (the dev machine's packing script). A short form:
# NOPEER=1 ROUNDS=1 NCU_BY=0 (about 200 s).
. tools/device-lib.sh
dev_init d.txt ${PK:-cuda60b}
[ -n "$NOPEER" ] || dev_peer_start 14 4 deepseek-v2-lite /tmp/tb/d-bf16.gguf
st tests
TM_CONF_MODELS=llama3,qwen3_moe; export TM_CONF_MODELS
dev_gpu_tests
grep -E "^--" $W/dec.txt | head -5 >> $A
st models
dev_dec_shapes
st ab
for r in $(seq 1 ${ROUNDS:-2}); do for m in d l; do for v in ${VARIANTS:-new:1 new:0 old:1}; do
  k=${v#*:}; x=$B/tandem; [ ${v%:*} = new ] || x=$B/tandem-old
  TANDEM_CUDA_DEC_MMA=$k timeout 40 $x bench /tmp/tb/$m.tdm -t 4 --tests tg128,e4000+96 --reps 3 --prefill cuda \
    --decode cuda --md $W/ab-$m-${v%:*}$k-$r.md > /dev/null 2>> $W/bench.err
  echo "$m ${v%:*} mma=$k round $r: $(grep -E '^\| (tg|e)' $W/ab-$m-${v%:*}$k-$r.md | cut -d'|' -f2,4,5 | tr '\n' ' ')" >> $A
done; done; done
dev_ncu_tg ${NCU_BY:-230}
cd $W && tar -czf $OUT/d.tar.gz ab-*.md dec.txt cuda.txt conf.txt moe.txt 2>/dev/null; cd $R
if [ -z "$NOPEER" ]; then dev_peer_tail ${PEER_BY:-300} d
else grep -iE "error|fail" $W/bench.err | head -6 | cut -c1-250 >> $A; st done; fi
