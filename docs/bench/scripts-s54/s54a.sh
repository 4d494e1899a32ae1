#!/bin/sh
# session 54, call 1: mixture-of-experts layers on the CUDA engine (engine/cuda/cu_moe.h). Tests: test_cuda_moe
# (the indexed experts against the grouped ones bit for bit, against cpu-avx512 and the f32 reference, batches),
# test_engine_conf's CUDA runs (every MoE fixture and the conformance Qwen3-MoE against transformers), test_cuda
# and test_cuda_decode (the GEMV kernel took the indexed form). Then speed on a Qwen3-30B-A3B shape cut to 8 of
# its 48 layers (tandem synth --layers 8; default package: int8 prefill, int4 g64 decode): tandem bench pp512 /
# tg128 with the GPU in both roles, the indexed path on and off (TANDEM_CUDA_MOE_IX=0), two rounds.
# Carried: tmp/cuda54a.tar.xz (bin/, lib/, shared/).
R=$(pwd); OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" build /tmp/tb; A=$OUT/a.txt; P=$R/tmp/pk; W=$OUT/w
mkdir -p $W $P; T0=$(date +%s); st() { echo "== $1 at $(( $(date +%s) - T0 )) s" >> "$A"; }
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv >> "$A" 2>&1
tar -C $P -xJf ${TAR:-tmp/cuda54a.tar.xz}
export LD_LIBRARY_PATH=$P/lib TM_SHARED=$P/shared TANDEM_GEMV=avx512
B=$P/bin
st test_cuda_moe
( timeout 120 $B/test_cuda_moe ) > $W/moe.txt 2>&1; grep -vE "^ok " $W/moe.txt | head -40 >> $A
st synth
( $B/tandem synth --like qwen3-30b-a3b --layers 8 -o /tmp/tb/q > /dev/null 2>> $A; \
  $B/tandem convert /tmp/tb/q -o /tmp/tb/q.tdm --threads 12 > $W/convert.txt 2>&1 ) &
SP=$!
st test_engine_conf
( TM_CONF_MODELS=llama3,qwen3_moe,qwen3 TM_CONF_ENGINE=cuda timeout 240 $B/test_engine_conf ) > $W/conf.txt 2>&1
grep -E "CHECK|passed|qwen3_moe|mixtral|gpt_oss|qwen2_moe|olmoe|granitemoe|glm4_moe|dots1|ernie4_5_moe|refused|all [0-9]+ fixtures" $W/conf.txt | head -60 >> $A
st test_cuda
( timeout 90 $B/test_cuda ) > $W/cuda.txt 2>&1; grep -E "CHECK|passed|SKIP" $W/cuda.txt | head -8 >> $A
wait $SP; st bench; tail -3 $W/convert.txt >> $A; ls -la /tmp/tb/q.tdm >> $A
for r in 1 2; do for ix in 1 0; do
  [ $(( $(date +%s) - T0 )) -gt 470 ] && break 2
  TANDEM_CUDA_MOE_IX=$ix timeout 120 $B/tandem bench /tmp/tb/q.tdm -t 4 --tests pp512,tg128 --reps 3 \
    --prefill cuda --decode cuda --json $W/b$r-$ix.json > $W/b$r-$ix.txt 2>&1
  echo "round $r ix=$ix: $(grep -E 'pp512|tg128' $W/b$r-$ix.txt | tr -s ' ' | tr '\n' ' ')" >> $A
done; done
st test_cuda_decode
( timeout 100 $B/test_cuda_decode ) > $W/dec.txt 2>&1; grep -E "CHECK|passed|SKIP" $W/dec.txt | head -12 >> $A
st done
