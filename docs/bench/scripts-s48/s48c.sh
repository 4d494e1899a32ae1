#!/bin/sh
# session 48, call 3 (a fresh machine): test_cuda again (call 1 had no build/ for its package), and where the
# decode step's GPU time goes on the Llama-3.2-1B shape: TANDEM_CUDA_GRAPHS=0 with the engine's profile
# (GEMMs / attention / q-k-v pass a step), and Nsight Systems' kernel summary where the machine has nsys.
# Carried: tmp/cuda48.tar.xz.
R=$(pwd); OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" build /tmp/tb; A=$OUT/c.txt; P=$R/tmp/pk
T0=$(date +%s); st() { echo "== $1 at $(( $(date +%s) - T0 )) s" >> "$A"; }
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total,driver_version --format=csv >> "$A" 2>&1
mkdir -p $P && tar -C $P -xJf tmp/cuda48.tar.xz
export LD_LIBRARY_PATH=$P/lib TM_SHARED=$P/shared TANDEM_GEMV=avx512
B=$P/bin
( timeout 100 $B/test_cuda ) 2>&1 | grep -E 'CHECK|passed|SPLIT' | head -20 >> $A
st synth
$B/tandem synth --like llama-3.2-1b -o /tmp/tb/l > /dev/null 2>> $A
$B/tandem convert /tmp/tb/l -o $R/tmp/l.tdm --threads 16 > /dev/null 2>> $A
st profile
for g in 0 1; do
  TANDEM_CUDA_GRAPHS=$g TANDEM_CUDA_PROFILE=1 timeout 60 $B/tandem bench $R/tmp/l.tdm -t 2 --tests tg128 --reps 2 --prefill cuda \
    --decode cuda --md $OUT/tg-$g.md > /dev/null 2> $OUT/tg-$g.err
  echo "-- graphs $g" >> $A; grep -E '^\| tg' $OUT/tg-$g.md >> $A; grep "cuda profile" $OUT/tg-$g.err | cut -c1-300 >> $A
done
NS=$(command -v nsys || ls /usr/local/cuda*/bin/nsys /opt/nvidia/nsight-systems/*/bin/nsys 2>/dev/null | head -1)
echo "nsys: $NS" >> $A
if [ -n "$NS" ]; then
  st nsys
  timeout 150 $NS profile --cuda-graph-trace=node -o /tmp/tgprof -f true $B/tandem bench $R/tmp/l.tdm -t 2 --tests tg128 \
    --reps 1 --prefill cuda --decode cuda > /dev/null 2>> $OUT/nsys.err
  timeout 100 $NS stats --report cuda_gpu_kern_sum --format csv /tmp/tgprof.nsys-rep > $OUT/kern.csv 2>> $OUT/nsys.err
  head -40 $OUT/kern.csv | cut -c1-260 >> $A
fi
st done
