#!/bin/sh
# session 55, call 3 (trimmed to the device time left after refused starts: two rounds; nsys only with time to
# spare): the MoE layer's launches cut by two (the FFN norm writes the f32 and bf16 rows in one pass; the
# combine adds its row into the residual stream and runs the next norm, residual_row in cu_rows.cuh). The GPU tests
# (test_cuda_moe, test_engine_conf's CUDA runs on llama3 / qwen3 / qwen3_moe, test_cuda, test_cuda_decode), then the
# Qwen3-30B-A3B shape cut to 8 layers: pp512 / tg128 of this build (bin/) and call 2's (bin2/), interleaved, two
# rounds; then where nsys is on the machine, a kernel summary of a tg128 run. Carried: tmp/cuda55c.tar.xz.
# (Rewritten over tools/device-lib.sh after the call: the same commands.)
. tools/device-lib.sh
dev_init a.txt ${PK:-cuda55c}
dev_moe_shape /tmp/tb &
SP=$!
st tests
( timeout 150 $B/test_cuda_moe ) > $W/moe.txt 2>&1; grep -E "CHECK|passed|qwen3_moe" $W/moe.txt | head -20 >> $A
( TM_CONF_MODELS=llama3,qwen3_moe,qwen3 TM_CONF_ENGINE=cuda timeout 200 $B/test_engine_conf ) > $W/conf.txt 2>&1
grep -E "CHECK|passed|all [0-9]+ fixtures" $W/conf.txt | head -12 >> $A
( timeout 60 $B/test_cuda ) > $W/cuda.txt 2>&1; grep -E "CHECK|passed|SKIP" $W/cuda.txt | head -8 >> $A
( timeout 90 $B/test_cuda_decode ) > $W/dec.txt 2>&1; grep -E "CHECK|passed|SKIP" $W/dec.txt | head -8 >> $A
wait $SP; st bench; tail -1 $W/convert.txt >> $A
bn() { timeout 90 $1/tandem bench /tmp/tb/q.tdm -t 4 --tests pp512,tg128 --reps 3 --prefill cuda --decode cuda \
    --md $W/b-$2-$3.md > $W/b-$2-$3.json 2>> $W/bench.err
  echo "$2 round $3: $(grep -E '^\| (pp|tg)' $W/b-$2-$3.md | cut -d'|' -f2,4 | tr '\n' ' ')" >> $A; }
for r in 1 2; do bn $B new $r; bn $P/bin2 old $r; done
NS=$(command -v nsys || ls /usr/local/cuda*/bin/nsys /opt/nvidia/nsight-systems*/bin/nsys 2>/dev/null | head -1)
echo "nsys: ${NS:-none}" >> $A
if [ -n "$NS" ] && [ $(( $(date +%s) - T0 )) -lt 200 ]; then
  st nsys
  ( cd $W && timeout 120 $NS profile -o $W/tg --force-overwrite true --trace cuda $B/tandem bench /tmp/tb/q.tdm -t 4 \
      --tests tg128 --reps 1 --prefill cuda --decode cuda > $W/nsys.log 2>&1; \
    timeout 90 $NS stats --report cuda_gpu_kern_sum --format csv $W/tg.nsys-rep > $W/kern.csv 2>> $W/nsys.log )
  head -25 $W/kern.csv | cut -c1-220 >> $A
fi
grep -iE "error|fail" $W/bench.err | head -10 | cut -c1-250 >> $A
cp $W/*.md $W/moe.txt $W/kern.csv $OUT/ 2>/dev/null
st done
