#!/bin/sh
# session 56, call 1: the MoE decode step's launches cut by two a layer (the attention's residual pass writes the
# FFN norm in f32 and bf16 for the router and the experts; the router's product and the pick in one launch,
# cu_moe_route). The GPU tests of this build (bin/), then the Qwen3-30B-A3B shape cut to 8 layers: pp512 / tg128 of
# this build, of this build with the routing in two launches (TANDEM_CUDA_MOE_ROUTE1=0) and of the build before
# (bin2/, HEAD 7a2dde3's), interleaved, three rounds; then the decode step profiled (TANDEM_CUDA_PROFILE=1, CUDA
# graphs, and launched one by one) for both builds. Carried: tmp/cuda56a.tar.xz. (Rewritten over tools/device-lib.sh
# after the call: the same commands.)
. tools/device-lib.sh
dev_init a.txt ${PK:-cuda56a}
dev_moe_shape /tmp/tb &
SP=$!
st tests
dev_gpu_tests
wait $SP; st bench; tail -1 $W/convert.txt >> $A
bn() { env $4 timeout 90 $1/tandem bench /tmp/tb/q.tdm -t 4 --tests pp512,tg128 --reps 3 --prefill cuda --decode cuda \
    --md $W/b-$2-$3.md > $W/b-$2-$3.json 2>> $W/bench.err
  echo "$2 round $3: $(grep -E '^\| (pp|tg)' $W/b-$2-$3.md | cut -d'|' -f2,4 | tr '\n' ' ')" >> $A; }
for r in 1 2 3; do bn $B new $r X=1; bn $P/bin2 old $r X=1; bn $B route2 $r TANDEM_CUDA_MOE_ROUTE1=0; done
st profile
pf() { env TANDEM_CUDA_PROFILE=1 $3 timeout 60 $1/tandem bench /tmp/tb/q.tdm -t 4 --tests tg128 --reps 2 --prefill cuda \
    --decode cuda > /dev/null 2> $W/prof-$2.txt; echo "-- $2 $3:" >> $A; grep "cuda profile" $W/prof-$2.txt | cut -c1-400 >> $A; }
pf $B new X=1; pf $P/bin2 old X=1; pf $B new-1by1 TANDEM_CUDA_GRAPHS=0; pf $P/bin2 old-1by1 TANDEM_CUDA_GRAPHS=0
NS=$(command -v nsys || ls /usr/local/cuda*/bin/nsys /opt/nvidia/nsight-systems*/bin/nsys 2>/dev/null | head -1)
echo "nsys: ${NS:-none}" >> $A
grep -iE "error|fail" $W/bench.err | head -10 | cut -c1-250 >> $A
cp $W/*.md $W/moe.txt $W/conf.txt $W/prof-*.txt $OUT/ 2>/dev/null
st done
