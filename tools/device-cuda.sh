#!/bin/sh
# tools/device-cuda.sh: the CUDA prefill engine on the lent GPU machine (device tool, kind nvidia-h200):
# its tests on the GPU, then tandem bench with the GPU prefilling and the CPU decoding, beside the
# CPU engines alone. Run from the repository root there with tmp/cuda.tar.xz carried, made here by
#   make CUDA=1 BUILD=build-cuda build-cuda/tandem build-cuda/tests/test_cuda \
#        build-cuda/tests/test_engine_conf build-cuda/tests/test_engine build-cuda/tests/test_sched
#   and a tar of: bin/ (those, stripped), lib/ (tools/devdeps.sh's libraries), shared/conformance/models
# (the tree is ~48 MiB of the 64 MiB a call carries, so the binaries travel built and compressed).
# Writes $OUT/cuda.txt (the log) and $OUT/*.json (tandem bench).
R=$(pwd); OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" build; A=$OUT/cuda.txt
P=/tmp/pk; mkdir -p $P && tar -C $P -xJf tmp/cuda.tar.xz
export LD_LIBRARY_PATH=$P/lib TM_SHARED=$P/shared TANDEM_GEMV=avx512
B=$P/bin
st() { echo "== $1 at $(date +%s)" >> "$A"; }
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total,driver_version --format=csv >> "$A" 2>&1
lscpu | grep -iE "model name|^CPU\(s\)" >> "$A"
"$B/tandem" devices --no-measure 2>&1 | grep -A6 '^engines' >> "$A"
st tests
( cd "$R" && timeout 150 "$B/test_cuda" ) >> "$A" 2>&1
for i in 1 2; do ( cd "$R" && TM_CONF_ENGINE=cuda timeout 200 "$B/test_engine_conf" ) 2>&1 | grep -v ' fixture: ' >> "$A"; done
# the attention with its keys split (long contexts) over every architecture
for v in TANDEM_CUDA_SPLIT=3; do
  echo "-- $v" >> "$A"
  ( cd "$R" && env $v TM_CONF_ENGINE=cuda timeout 200 "$B/test_engine_conf" ) 2>&1 | grep -E 'CHECK|top-1 [0-9.]+% of|passed' >> "$A"
done
for t in test_engine test_sched; do ( cd "$R" && timeout 150 "$B/$t" ) 2>&1 | grep -E 'CHECK failed|passed|SKIP' >> "$A"; done
st packages
mkdir -p /tmp/tb
for m in llama-3.2-1b:l qwen2.5-0.5b:q; do
  "$B/tandem" synth --like "${m%%:*}" -o "/tmp/tb/${m##*:}" > /dev/null 2>> "$A"
  "$B/tandem" convert "/tmp/tb/${m##*:}" -o "/tmp/tb/${m##*:}.tdm" --threads 16 > /dev/null 2>> "$A"
done
st bench
for m in ${BENCH_MODELS:-l q}; do
  TANDEM_CUDA_PROFILE=1 timeout 150 "$B/tandem" bench /tmp/tb/$m.tdm -t 2 --tests pp512,pp2048,pp8192,pp16384,tg128 --reps 3 \
    --prefill cuda --decode cpu-avx512 --handoff 512,2048,8192,16384 --md "$OUT/$m-cuda.md" > "$OUT/$m-cuda.json" 2>> "$A"
  grep -E '^\| ' "$OUT/$m-cuda.md" >> "$A"
  timeout 120 "$B/tandem" bench /tmp/tb/$m.tdm -t 2 --tests pp512,tg128 --reps 3 --ceilings --md "$OUT/$m-cpu.md" \
    > "$OUT/$m-cpu.json" 2>> "$A"
  grep -E '^\| ' "$OUT/$m-cpu.md" >> "$A"
done
st done
