#!/bin/sh
# session 54, call 5: the final build's GPU tests (the batched expert GEMMs taken out after call 4): test_cuda_moe,
# test_engine_conf's CUDA runs (the conformance models carried: llama3, qwen3, qwen3_moe), test_cuda, test_cuda_decode.
# Carried: tmp/cuda54e.tar.xz (bin/, lib/, shared/).
R=$(pwd); OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" build; A=$OUT/a.txt; P=$R/tmp/pk; W=/tmp/w
mkdir -p $W $P; T0=$(date +%s); st() { echo "== $1 at $(( $(date +%s) - T0 )) s" >> "$A"; }
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv >> "$A" 2>&1
tar -C $P -xJf tmp/cuda54e.tar.xz
export LD_LIBRARY_PATH=$P/lib TM_SHARED=$P/shared TANDEM_GEMV=avx512
B=$P/bin
st test_cuda_moe
( timeout 120 $B/test_cuda_moe ) > $W/moe.txt 2>&1; grep -vE "^ok " $W/moe.txt | head -40 >> $A
st test_engine_conf
( TM_CONF_MODELS=llama3,qwen3_moe,qwen3 TM_CONF_ENGINE=cuda timeout 200 $B/test_engine_conf ) > $W/conf.txt 2>&1
grep -E "CHECK|passed|all [0-9]+ fixtures" $W/conf.txt | head -20 >> $A
grep -E "^cuda, prefill|^cuda \+|^cpu-avx512 \+" $W/conf.txt | head -20 >> $A
st test_cuda
( timeout 90 $B/test_cuda ) > $W/cuda.txt 2>&1; grep -E "CHECK|passed|SKIP" $W/cuda.txt | head -8 >> $A
( timeout 150 $B/test_cuda_decode ) > $W/dec.txt 2>&1; grep -E "CHECK|passed|SKIP" $W/dec.txt | head -8 >> $A
cp $W/conf.txt $OUT/ 2>/dev/null
st done
