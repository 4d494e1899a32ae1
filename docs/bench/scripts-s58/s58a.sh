#!/bin/sh
# session 58, call 1: multi-head latent attention on the CUDA engine (engine/cuda/cu_mla.h). The GPU tests (test_cuda
# on three latent-attention fixtures, test_engine_conf's CUDA runs over every fixture, the latent ones among them);
# then the DeepSeek-V2-Lite shape cut to 4 layers (tandem synth): KL and top-1 against the f32 reference with the
# GPU in both roles (bf16 in both stages; int8 prefill and int4 decode), every route; speed with the GPU in both
# roles and hybrid (GPU prefill, AVX-512 decode), two rounds. Carried: tmp/cuda58a.tar.xz.
. tools/device-lib.sh
dev_init a.txt ${PK:-cuda58a}
rm -f $B/test_cuda_gemv # (the GEMV kernels are unchanged: its time goes to the new path)
st tests
dev_gpu_tests
grep -E "latent|==|KL" $W/cuda.txt | head -40 >> $A
grep -iE "deepseek|glm4_moe_lite" $W/conf.txt | head -20 >> $A
st synth
$B/tandem synth --like deepseek-v2-lite --layers 4 -o /tmp/tb/d > /dev/null 2>> $A
$B/tandem convert /tmp/tb/d -o /tmp/tb/d.tdm --threads 16 > $W/convert.txt 2>&1; tail -2 $W/convert.txt >> $A
st kld
cat README.md docs/architecture.md docs/serve.md > $W/text.txt
for pe in "bf16 bf16" "int8 int4g64"; do set -- $pe
  timeout 200 $B/tandem kld /tmp/tb/d --file $W/text.txt --prefill-enc $1 --decode-enc $2 --ctx 384 --prefill-len 300 \
    --max-tokens 384 --prefill-engine cuda --decode-engine cuda --threads 16 >> $A 2>&1; echo "kld $1/$2 rc $?" >> $A; done
st bench
for r in 1 2; do for d in cuda avx512; do
  timeout 100 $B/tandem bench /tmp/tb/d.tdm -t 16 --tests pp512,pp4096,tg128,e4000+96 --reps 3 --prefill cuda \
    --decode $d --md $W/b-$d-$r.md > $W/b-$d-$r.json 2>> $W/bench.err
  echo "-- round $r, decode $d:" >> $A; grep -E '^\| (pp|tg|e)' $W/b-$d-$r.md >> $A; done; done
grep -iE "error|fail" $W/bench.err | head -10 | cut -c1-250 >> $A
cp $W/b-*.md $W/cuda.txt $W/conf.txt $OUT/ 2>/dev/null
st done
