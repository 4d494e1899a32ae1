#!/bin/sh
# Session 59, call 1: session 58's prepared decode-attention call (its s58d.sh, folded into this one and removed),
# run with dec-segs.diff applied to the tree (now in the engine: the commit that added this script): the decode
# attention's key segments by each row's own keys and the latent split over several blocks. The GPU tests
# (test_cuda_decode also with TANDEM_CUDA_DEC_SEGS=0); tg128 and e4000+96 of this build against the previous one
# (bin/tandem-old), interleaved, two rounds, on the DeepSeek-V2-Lite shape (4 layers); an ncu of a tg16 decode
# (kernel time by name) on the new build; then, where llama.cpp's CUDA build is done in time, one round beside it. Carried: tmp/cuda59a.tar.xz (bin/tandem with the diff, bin/tandem-old without), tmp/peer.tar.xz.
. tools/device-lib.sh
dev_init c.txt ${PK:-cuda59a}
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
dev_peer_tail 330 d
