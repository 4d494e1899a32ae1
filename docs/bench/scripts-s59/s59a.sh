#!/bin/sh
# Session 59, call 1: session 58's prepared decode-attention call (scripts-s58/s58d.sh, its header says what it
# measures), run with dec-segs.diff applied to the tree (now
# in the engine: the commit that added this script), plus an ncu of a tg16 decode (kernel time by name) on the
# new build. Carried: tmp/cuda59a.tar.xz (bin/tandem with the diff, bin/tandem-old without), tmp/peer.tar.xz.
. tools/device-lib.sh
dev_init c.txt ${PK:-cuda59a}
el() { echo $(( $(date +%s) - T0 )); }
dev_peer_start 12 4 deepseek-v2-lite /tmp/tb/d-bf16.gguf
st tests
TM_CONF_MODELS=llama3,qwen3_moe dev_gpu_tests
grep -E "^--" $W/dec.txt | head -4 >> $A
st model
$B/tandem synth --like deepseek-v2-lite --layers 4 -o /tmp/tb/d > /dev/null 2>> $A
$B/tandem convert /tmp/tb/d -o /tmp/tb/d.tdm --threads 4 > $W/convert.txt 2>&1; tail -1 $W/convert.txt >> $A
rm -rf /tmp/tb/d
st ab
for r in 1 2; do for bin in tandem tandem-old; do
  timeout 40 $B/$bin bench /tmp/tb/d.tdm -t 4 --tests tg128,e4000+96 --reps 3 --prefill cuda --decode cuda \
    --md $W/ab-$bin-$r.md > /dev/null 2>> $W/bench.err
  echo "$bin round $r: $(grep -E '^\| (tg|e)' $W/ab-$bin-$r.md | cut -d'|' -f2,4,5 | tr '\n' ' ')" >> $A
done; done
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
if [ -n "$NCU" ]; then
  timeout 120 $NCU --clock-control none --metrics gpu__time_duration.sum --csv \
    $B/tandem bench /tmp/tb/d.tdm -t 4 --tests tg16 --reps 1 --prefill cuda --decode cuda > $W/ncu-t.csv 2> $W/ncu-t.err
  st "ncu (rc $?)"; dev_ncu_agg $W/ncu-t.csv; gzip -c $W/ncu-t.csv > $OUT/ncu-t.csv.gz
fi
cd $W && tar -czf $OUT/c.tar.gz ab-*.md dec.txt cuda.txt conf.txt moe.txt 2>/dev/null; cd $R
while [ $(el) -lt 330 ] && kill -0 $BP 2>/dev/null; do sleep 5; done
st "peer build"; tail -1 $L/b.log | cut -c1-200 >> $A
if [ -x $L/llbench ] && [ $(el) -lt 360 ]; then
  timeout 40 $L/llbench quantize /tmp/tb/d-bf16.gguf /tmp/tb/d-q4_0.gguf q4_0 16 > $W/quant.txt 2>&1
  timeout 45 $B/tandem bench /tmp/tb/d.tdm -t 4 --tests pp512,tg128 --reps 3 --prefill cuda --decode cuda \
    --peer llama.cpp --peer-model /tmp/tb/d-q4_0.gguf --peer-bin $L/llbench --md $W/peer1.md > /dev/null 2>> $W/bench.err
  echo "-- tandem int4 vs llama.cpp Q4_0, both CUDA" >> $A; grep -E '^\| ' $W/peer1.md >> $A
fi
grep -iE "error|fail" $W/bench.err | head -6 | cut -c1-250 >> $A
st done
