#!/bin/sh
# session 55, call 1: the tiled MoE path (cu_moe_sort + cu_moe_mm: the experts' products on tensor cores, no
# synchronisation). test_cuda_moe (the kernels against the host, then the models), test_engine_conf's CUDA runs
# (llama3, qwen3, qwen3_moe carried), then the Qwen3-30B-A3B shape cut to 8 layers: pp512 / tg128 with the tiled
# path on and off (TANDEM_CUDA_MOE_MM=0: session 54's loop over the experts), interleaved, and a phase timing of
# each. Carried: tmp/cuda55a.tar.xz (bin/, lib/, shared/). (Rewritten over tools/device-lib.sh after the call: the
# same commands.)
. tools/device-lib.sh
dev_init a.txt ${PK:-cuda55a}
dev_moe_shape /tmp/tb &
SP=$!
st test_cuda_moe
( timeout 150 $B/test_cuda_moe ) > $W/moe.txt 2>&1; grep -vE "^ok " $W/moe.txt | head -60 >> $A
st test_engine_conf
( TM_CONF_MODELS=llama3,qwen3_moe,qwen3 TM_CONF_ENGINE=cuda timeout 200 $B/test_engine_conf ) > $W/conf.txt 2>&1
grep -E "CHECK|passed|all [0-9]+ fixtures" $W/conf.txt | head -20 >> $A
grep -E "^cuda, bf16 KV, (mixtral|gpt_oss|qwen2_moe|olmoe|granitemoe|glm4_moe|dots1|ernie4_5_moe|qwen3_moe)" $W/conf.txt | head -20 >> $A
wait $SP; st bench; tail -1 $W/convert.txt >> $A
bn() { TANDEM_CUDA_MOE_MM=$1 timeout 90 $B/tandem bench /tmp/tb/q.tdm -t 4 --tests pp512,tg128 --reps 3 \
    --prefill cuda --decode cuda --md $W/b-$1-$2.md > $W/b-$1-$2.json 2>> $W/bench.err
  echo "mm=$1 round $2: $(grep -E '^\| (pp|tg)' $W/b-$1-$2.md | cut -d'|' -f2,4 | tr '\n' ' ')" >> $A; }
bn 1 1; bn 0 1; bn 1 2; bn 0 2; bn 1 3
for v in 1 0; do
  TANDEM_CUDA_MOE_MM=$v TANDEM_CUDA_MOE_TIMES=1 timeout 60 $B/tandem bench /tmp/tb/q.tdm -t 4 --tests pp512 --reps 2 \
    --prefill cuda --decode cuda > /dev/null 2> $W/times$v.txt; echo "mm=$v: $(grep 'cuda moe times' $W/times$v.txt)" >> $A
done
grep -iE "error|fail" $W/bench.err | head -10 | cut -c1-250 >> $A
cp $W/*.md $W/moe.txt $W/conf.txt $OUT/ 2>/dev/null
st done
