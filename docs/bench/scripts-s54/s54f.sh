#!/bin/sh
# session 54, call 6: the prefill's bf16 experts' activation as one pass over all the rows (cu_moe.c: an activation
# launch an expert fewer). test_cuda_moe and test_engine_conf's CUDA runs (every MoE fixture's bf16 prefill against
# transformers), then pp512 / tg128 on the Qwen3-30B-A3B shape cut to 8 layers, three rounds. Carried:
# tmp/cuda54f.tar.xz (bin/, lib/, shared/).
R=$(pwd); OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" build /tmp/tb; A=$OUT/a.txt; P=$R/tmp/pk; W=/tmp/w
mkdir -p $W $P; T0=$(date +%s); st() { echo "== $1 at $(( $(date +%s) - T0 )) s" >> "$A"; }
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv >> "$A" 2>&1
tar -C $P -xJf tmp/cuda54f.tar.xz
export LD_LIBRARY_PATH=$P/lib TM_SHARED=$P/shared TANDEM_GEMV=avx512
B=$P/bin
( $B/tandem synth --like qwen3-30b-a3b --layers 8 -o /tmp/tb/q > /dev/null 2>> $A; \
  $B/tandem convert /tmp/tb/q -o /tmp/tb/q.tdm --threads 8 > $W/convert.txt 2>&1 ) &
SP=$!
st tests
( timeout 120 $B/test_cuda_moe ) > $W/moe.txt 2>&1; grep -E "CHECK|passed" $W/moe.txt | head -10 >> $A
( TM_CONF_MODELS=llama3,qwen3_moe,qwen3 TM_CONF_ENGINE=cuda timeout 200 $B/test_engine_conf ) > $W/conf.txt 2>&1
grep -E "CHECK|passed|all [0-9]+ fixtures" $W/conf.txt | head -12 >> $A
grep -E "^cuda, bf16 KV, (mixtral|gpt_oss|qwen2_moe|olmoe|granitemoe|glm4_moe|dots1|ernie4_5_moe) fixture" $W/conf.txt >> $A
wait $SP; st bench
for r in 1 2 3; do
  timeout 90 $B/tandem bench /tmp/tb/q.tdm -t 4 --tests pp512,tg128 --reps 3 --prefill cuda --decode cuda \
    --md $W/b$r.md > /dev/null 2>> $W/bench.err
  echo "round $r: $(grep -E '^\| (pp|tg)' $W/b$r.md | cut -d'|' -f2,4 | tr '\n' ' ')" >> $A
done
st done
