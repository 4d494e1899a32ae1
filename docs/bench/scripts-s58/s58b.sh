#!/bin/sh
# session 58, call 2: the DeepSeek-V2-Lite shape cut to 4 layers (tandem synth; latent attention on the GPU,
# engine/cuda/cu_mla.h) beside llama.cpp's CUDA build of the same shape (tools/make_moe_gguf.py's deepseek2 in
# llama.cpp's MLA form, quantized to Q4_0): a decode run under TANDEM_CUDA_PROFILE=1 and under ncu (kernel time by
# name), then rounds of pp512 / tg128 / e4000+96 in one invocation each (--peer llama.cpp). Carried:
# tmp/cuda58b.tar.xz (tandem alone), tmp/peer.tar.xz (llama.cpp's source as it ships in node-llama-cpp@3.21.1).
. tools/device-lib.sh
dev_init b.txt ${PK:-cuda58b}
el() { echo $(( $(date +%s) - T0 )); }
L=$R/tmp/llb; mkdir -p $L && tar -C $L -xJf tmp/peer.tar.xz
( dev_peer_build $L 14; echo "peer build rc $?" >> $L/b.log ) &
BP=$!
( PYTHONPATH=$L/gguf-py python3 tools/make_moe_gguf.py /tmp/tb/d-bf16.gguf 4 deepseek-v2-lite > $W/gguf.txt 2>&1 ) &
GP=$!
$B/tandem synth --like deepseek-v2-lite --layers 4 -o /tmp/tb/d > /dev/null 2>> $A
$B/tandem convert /tmp/tb/d -o /tmp/tb/d.tdm --threads 8 > $W/convert.txt 2>&1; tail -1 $W/convert.txt >> $A
rm -rf /tmp/tb/d
st profile
TANDEM_CUDA_PROFILE=1 timeout 60 $B/tandem bench /tmp/tb/d.tdm -t 4 --tests pp512,tg128 --reps 1 --prefill cuda \
  --decode cuda > /dev/null 2> $W/prof.txt; grep -vE "^bench" $W/prof.txt | tail -30 >> $A
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
if [ -n "$NCU" ]; then
  timeout 150 $NCU --clock-control none --metrics gpu__time_duration.sum --csv \
    $B/tandem bench /tmp/tb/d.tdm -t 4 --tests tg16 --reps 1 --prefill cuda --decode cuda > $W/ncu-t.csv 2> $W/ncu-t.err
  st "ncu (rc $?)"; dev_ncu_agg $W/ncu-t.csv
fi
wait $GP; cat $W/gguf.txt | tail -2 >> $A; st "wait peer build"; wait $BP; tail -2 $L/b.log | cut -c1-200 >> $A
st quantize
[ -x $L/llbench ] && timeout 120 $L/llbench quantize /tmp/tb/d-bf16.gguf /tmp/tb/d-q4_0.gguf q4_0 16 > $W/quant.txt 2>&1
tail -2 $W/quant.txt | cut -c1-200 >> $A; rm -f /tmp/tb/d-bf16.gguf
for r in 1 2 3; do
  [ $(el) -lt 480 ] || break
  timeout 100 $B/tandem bench /tmp/tb/d.tdm -t 4 --tests pp512,tg128,e4000+96 --reps 3 --prefill cuda --decode cuda \
    --peer llama.cpp --peer-model /tmp/tb/d-q4_0.gguf --peer-bin $L/llbench --md $W/peer$r.md > $W/peer$r.json 2>> $W/bench.err
  echo "-- round $r: tandem int4 vs llama.cpp Q4_0, both CUDA" >> $A; grep -E '^\| ' $W/peer$r.md >> $A
done
grep -iE "error|dropped|fail" $W/bench.err | head -10 | cut -c1-250 >> $A
cp $W/peer*.md $W/prof.txt $OUT/ 2>/dev/null; gzip -c $W/ncu-t.csv > $OUT/ncu-t.csv.gz 2>/dev/null
st done
