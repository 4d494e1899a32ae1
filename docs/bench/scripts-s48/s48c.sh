#!/bin/sh
# session 48, call 3 (a fresh machine): the attention kernel with its scores in log2 units (exp2 of the
# differences, one multiply less an element) and, at head dims <= 64, launch bounds for 4 blocks an SM
# (bin/tandem, the tests) against the first form (bin/tandem-a), interleaved, and with 4 key segments
# forced at every context (the engine's choice: one per 1,024 keys, up to 16); its tests (test_cuda_attn,
# test_cuda, test_engine_conf's CUDA runs); where the decode step's GPU time goes on the Llama-3.2-1B
# shape (TANDEM_CUDA_GRAPHS=0 with the engine's profile; Nsight Systems' kernel summary where the machine
# has nsys). Carried: tmp/cuda48c.tar.xz.
R=$(pwd); OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" build /tmp/tb; A=$OUT/c.txt; P=$R/tmp/pk
T0=$(date +%s); st() { echo "== $1 at $(( $(date +%s) - T0 )) s" >> "$A"; }
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total,driver_version --format=csv >> "$A" 2>&1
mkdir -p $P && tar -C $P -xJf tmp/cuda48c.tar.xz
export LD_LIBRARY_PATH=$P/lib TM_SHARED=$P/shared TANDEM_GEMV=avx512
B=$P/bin
( timeout 100 $B/test_cuda_attn ) 2>&1 | tail -3 >> $A
st synth
$B/tandem synth --like llama-3.2-1b -o /tmp/tb/l > /dev/null 2>> $A
$B/tandem convert /tmp/tb/l -o $R/tmp/l.tdm --threads 16 > /dev/null 2>> $A
st attention
for r in 1 2; do for v in a b s4; do
  [ $r = 2 ] && [ $v = s4 ] && continue   # round 2: the two builds only
  b=$B/tandem; [ $v = a ] && b=$B/tandem-a
  sp=0; [ $v = s4 ] && sp=4   # TANDEM_CUDA_SPLIT: the key segments forced (0: by context)
  TANDEM_CUDA_SPLIT=$sp TANDEM_CUDA_PROFILE=1 timeout 60 $b bench $R/tmp/l.tdm -t 2 --tests pp2048,pp8192,pp16384 --reps 1 --prefill cuda \
    --decode cuda --md $OUT/att-$v-$r.md > /dev/null 2> $OUT/att-$v-$r.err
  echo "-- round $r, $v" >> $A; grep -E '^\| pp' $OUT/att-$v-$r.md >> $A; grep "cuda profile" $OUT/att-$v-$r.err | cut -c1-250 >> $A
done; done
st profile
for g in 0; do
  TANDEM_CUDA_GRAPHS=$g TANDEM_CUDA_PROFILE=1 timeout 60 $B/tandem bench $R/tmp/l.tdm -t 2 --tests tg128 --reps 2 --prefill cuda \
    --decode cuda --md $OUT/tg-$g.md > /dev/null 2> $OUT/tg-$g.err
  echo "-- graphs $g" >> $A; grep -E '^\| tg' $OUT/tg-$g.md >> $A; grep "cuda profile" $OUT/tg-$g.err | cut -c1-300 >> $A
done
NS=$(command -v nsys || ls /usr/local/cuda*/bin/nsys /opt/nvidia/nsight-systems/*/bin/nsys 2>/dev/null | head -1)
echo "nsys: $NS" >> $A
if [ -n "$NS" ] && [ $(( $(date +%s) - T0 )) -lt 150 ]; then
  st nsys
  timeout 90 $NS profile --cuda-graph-trace=node -o /tmp/tgprof -f true $B/tandem bench $R/tmp/l.tdm -t 2 --tests tg128 \
    --reps 1 --prefill cuda --decode cuda > /dev/null 2>> $OUT/nsys.err
  timeout 60 $NS stats --report cuda_gpu_kern_sum --format csv /tmp/tgprof.nsys-rep > $OUT/kern.csv 2>> $OUT/nsys.err
  head -30 $OUT/kern.csv | cut -c1-220 >> $A
fi
st conf
[ $(( $(date +%s) - T0 )) -lt 150 ] && ( TM_CONF_ENGINE=cuda timeout 120 $B/test_engine_conf ) > $OUT/conf.txt 2>&1; grep -v ' fixture: ' $OUT/conf.txt | grep -E "^cuda|^cpu|passed" | head -20 >> $A
[ $(( $(date +%s) - T0 )) -lt 150 ] && ( timeout 60 $B/test_cuda ) 2>&1 | grep -E 'CHECK|passed|SPLIT' | head -20 >> $A
st done
