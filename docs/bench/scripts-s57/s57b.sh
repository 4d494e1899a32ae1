#!/bin/sh
# session 57, call 2: the indexed expert GEMV's shape from call 1's sweep (8 lanes a row set, K over up to 4 warps
# while each lane keeps 2 chunks a row) and the router's weight loads issued together before the PDL wait. The GPU
# tests; the indexed launch alone on the same MoE shapes (the kernel's choice, and TANDEM_CUDA_IX_SHAPE=0); the
# Qwen3-30B-A3B shape cut to 8 layers: tg128 of this build, with the old indexed shape, with the residual apart from
# the combine (TANDEM_CUDA_MOE_FUSE_RES=0), and with both, interleaved, three rounds; one decode run under ncu (kernel
# time by name); then three rounds of pp512 / tg128 beside llama.cpp's CUDA build (Q4_0 of the same shape).
# Carried: tmp/cuda57b.tar.xz, tmp/peer.tar.xz. Every file it keeps goes back in one archive (out.tar.gz).
. tools/device-lib.sh
dev_init a.txt ${PK:-cuda57b}
el() { echo $(( $(date +%s) - T0 )); }
dev_peer_start 12
dev_moe_shape /tmp/tb 4 &
SP=$!
st tests
dev_gpu_tests
st gemv
SH="egu:int4g64:1536:2048:gated:ix8 edn:int4g64:2048:768:ix8 ogu:int4g64:2048:2048:gated:ix8 odn:int4g64:2048:1024:ix8
 q2gu:int4g64:2816:2048:gated:ix4 q2dn:int4g64:2048:1408:ix4 xgu:int4g64:5760:2880:gated:ix4 xdn:int4g64:2880:2880:ix4
 e8dn:int8:2048:768:ix8"
timeout 60 $B/cu_gemv_bench -p 1 $SH > $W/gemv.txt 2>&1
TANDEM_CUDA_IX_SHAPE=0 timeout 60 $B/cu_gemv_bench -p 1 $SH > $W/gemv-old.txt 2>&1
echo "-- new:" >> $A; grep -E "^(e|o|q|x)" $W/gemv.txt >> $A; echo "-- old:" >> $A; grep -E "^(e|o|q|x)" $W/gemv-old.txt >> $A
wait $SP; st "converted"; tail -1 $W/convert.txt >> $A
bn() { env $3 timeout 60 $B/tandem bench /tmp/tb/q.tdm -t 4 --tests tg128 --reps 3 --prefill cuda --decode cuda \
    --md $W/b-$1-$2.md > $W/b-$1-$2.json 2>> $W/bench.err
  echo "$1 round $2: $(grep -E '^\| (pp|tg)' $W/b-$1-$2.md | cut -d'|' -f2,4,5 | tr '\n' ' ')" >> $A; }
for r in 1 2 3; do bn new $r X=1; bn ixold $r TANDEM_CUDA_IX_SHAPE=0; bn resapart $r TANDEM_CUDA_MOE_FUSE_RES=0
  bn both $r "TANDEM_CUDA_IX_SHAPE=0 TANDEM_CUDA_MOE_FUSE_RES=0"; done
st ncu
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
if [ -n "$NCU" ] && [ $(el) -lt 300 ]; then
  timeout 120 $NCU --clock-control none --metrics gpu__time_duration.sum --csv \
    $B/tandem bench /tmp/tb/q.tdm -t 4 --tests tg16 --reps 1 --prefill cuda --decode cuda > $W/ncu-t.csv 2> $W/ncu-t.err
  echo "-- tandem under ncu (rc $?)" >> $A; dev_ncu_agg $W/ncu-t.csv
fi
dev_peer_q4
st peer
for r in 1 2 3; do
  [ -f /tmp/tb/q-q4_0.gguf ] && [ $(el) -lt 500 ] || break
  dev_peer_round $r
done
grep -iE "error|dropped|fail" $W/bench.err | head -10 | cut -c1-250 >> $A
st done
cd $W && tar -czf $OUT/out.tar.gz b-*.md gemv*.txt gemv-t.txt moe.txt conf.txt peer*.md peer*.json ncu-t.csv 2>/dev/null
