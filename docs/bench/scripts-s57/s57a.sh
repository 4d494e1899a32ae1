#!/bin/sh
# session 57, call 1: the indexed expert GEMV with lane groups (a warp takes 32 / LG row sets of a short row, K not
# split over warps: cu_gemv.cu's gemv_ix_shape). The GPU tests (test_cuda_gemv's new indexed cases among them); the
# indexed launch alone (cu_gemv_bench :ix8) on MoE shapes, every lanes / K-split pair forced, and as before
# (TANDEM_CUDA_IX_SHAPE=0); the Qwen3-30B-A3B shape cut to 8 layers, tg128 of the new shape against the old one in
# the same binary, interleaved, three rounds; then one decode run of tandem and one of llama.cpp under ncu
# (kernel time by kernel name). The build also runs the experts' combine over a block per 256 columns (was one block a
# row) and, in a decode step, adds into the residual stream and runs the next norm there (TANDEM_CUDA_MOE_FUSE_RES=0:
# apart, as before): tg128 of four forms interleaved (new; the old indexed shape; the residual apart; both as before).
# Carried: tmp/cuda57a.tar.xz, tmp/peer.tar.xz. (Its ncu table's reader was moved into tools/device-lib.sh,
# dev_ncu_agg, after the call; the call's copy read ncu's "ns" unit as microseconds, so call 1's log shows
# nanoseconds under "us".)
. tools/device-lib.sh
dev_init a.txt ${PK:-cuda57a}
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
timeout 150 $B/cu_gemv_bench -p 1 -k 0,1,2,4 -l 0,8,16,32 $SH > $W/gemv.txt 2>&1
TANDEM_CUDA_IX_SHAPE=0 timeout 60 $B/cu_gemv_bench -p 1 $SH > $W/gemv-old.txt 2>&1
cat $W/gemv.txt $W/gemv-old.txt | cut -c1-100 >> $A
wait $SP; st "converted"; tail -1 $W/convert.txt >> $A
bn() { env $3 timeout 60 $B/tandem bench /tmp/tb/q.tdm -t 4 --tests tg128 --reps 3 --prefill cuda --decode cuda \
    --md $W/b-$1-$2.md > $W/b-$1-$2.json 2>> $W/bench.err
  echo "$1 round $2: $(grep -E '^\| (pp|tg)' $W/b-$1-$2.md | cut -d'|' -f2,4,5 | tr '\n' ' ')" >> $A; }
for r in 1 2 3; do bn new $r X=1; bn ixold $r TANDEM_CUDA_IX_SHAPE=0; bn resapart $r TANDEM_CUDA_MOE_FUSE_RES=0
  bn base $r "TANDEM_CUDA_IX_SHAPE=0 TANDEM_CUDA_MOE_FUSE_RES=0"; done
st ncu
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
echo "ncu: ${NCU:-none}" >> $A
if [ -n "$NCU" ]; then
  timeout 200 $NCU --clock-control none --metrics gpu__time_duration.sum --csv \
    $B/tandem bench /tmp/tb/q.tdm -t 4 --tests tg16 --reps 1 --prefill cuda --decode cuda > $W/ncu-t.csv 2> $W/ncu-t.err
  echo "-- tandem (rc $?)" >> $A; dev_ncu_agg $W/ncu-t.csv; tail -3 $W/ncu-t.err | cut -c1-200 >> $A
fi
dev_peer_q4
st peer
if [ -n "$NCU" ] && [ -f /tmp/tb/q-q4_0.gguf ]; then
  timeout 150 $NCU --clock-control none --metrics gpu__time_duration.sum --csv \
    $L/llbench bench /tmp/tb/q-q4_0.gguf 4 1 tg16 > $W/ncu-l.csv 2> $W/ncu-l.err
  echo "-- llama.cpp (rc $?)" >> $A; dev_ncu_agg $W/ncu-l.csv; tail -3 $W/ncu-l.err | cut -c1-200 >> $A
fi
[ $(el) -lt 470 ] && [ -f /tmp/tb/q-q4_0.gguf ] && dev_peer_round 1
grep -iE "error|dropped|fail" $W/bench.err | head -10 | cut -c1-250 >> $A
cp $W/b-*.md $W/gemv*.txt $W/gemv-t.txt $W/moe.txt $W/peer*.md $OUT/ 2>/dev/null
gzip -c $W/ncu-t.csv > $OUT/ncu-t.csv.gz 2>/dev/null; gzip -c $W/ncu-l.csv > $OUT/ncu-l.csv.gz 2>/dev/null
st done
