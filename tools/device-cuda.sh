#!/bin/sh
# tools/device-cuda.sh: the CUDA engine on the lent GPU machine (device tool, kind nvidia-h200): its
# tests on the GPU (STAGE=tests), then tandem bench (STAGE=bench): the GPU prefilling and decoding,
# the GPU prefilling beside the CPU decoding, the CPU engines alone. Run from the repository root
# there with tmp/cuda.tar.xz carried, made here by
#   make CUDA=1 BUILD=build-cuda, then a tar of: bin/ (tandem, cu_gemv_bench and tests test_cuda,
#   test_cuda_attn, test_cuda_decode, test_cuda_gemv, test_engine_conf, stripped), lib/ (tools/devdeps.sh's libraries),
#   shared/conformance/models (without qwen3_moe if the carry is too big: its 16 checks then fail)
# (the tree is ~49 MiB of the 64 MiB a call carries, so the binaries travel built and compressed;
# session 46's calls: docs/bench/scripts-s46/; session 48 built with CU_ARCH="-gencode arch=compute_90,code=sm_90",
# no PTX, so that the binaries and the peer's source fit one call: docs/bench/scripts-s48/).
# Writes $OUT/cuda.txt (the log) and $OUT/bench.tgz (tandem bench's JSON and markdown: a call brings
# back at most 8 files).
R=$(pwd); OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" build; A=$OUT/cuda.txt
P=/tmp/pk; mkdir -p $P && tar -C $P -xJf tmp/cuda.tar.xz
export LD_LIBRARY_PATH=$P/lib TM_SHARED=$P/shared TANDEM_GEMV=avx512
B=$P/bin
st() { echo "== $1 at $(date +%s)" >> "$A"; }
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total,driver_version --format=csv >> "$A" 2>&1
lscpu | grep -iE "model name|^CPU\(s\)" >> "$A"
case "${STAGE:-tests,bench}" in *tests*)
st tests
( cd "$R" && timeout 60 "$B/test_cuda_gemv" ) 2>&1 | grep -E "CHECK|passed|SKIP" >> "$A"
( cd "$R" && timeout 120 "$B/test_cuda_attn" ) 2>&1 | grep -E "CHECK|passed|SKIP" >> "$A"
( cd "$R" && timeout 120 "$B/test_cuda_decode" ) >> "$A" 2>&1
( cd "$R" && timeout 120 "$B/test_cuda" ) 2>&1 | grep -E 'CHECK|passed|session|SKIP' >> "$A"
( cd "$R" && TM_CONF_ENGINE=cuda timeout 300 "$B/test_engine_conf" ) 2>&1 | grep -v ' fixture: ' >> "$A"
;; esac
case "${STAGE:-tests,bench}" in *bench*)
st gemv
# the decode GEMV by shape, from HBM (tools/cu_gemv_bench.c: the benchmark models' products, B = 1 and 8)
[ -x "$B/cu_gemv_bench" ] && timeout 60 "$B/cu_gemv_bench" >> "$A" 2>&1
st packages
mkdir -p /tmp/tb
for m in ${BENCH_MODELS:-l q}; do
  case $m in l) like=llama-3.2-1b;; q) like=qwen2.5-0.5b;; esac
  "$B/tandem" synth --like $like -o "/tmp/tb/$m" > /dev/null 2>> "$A"
  "$B/tandem" convert "/tmp/tb/$m" -o "/tmp/tb/$m.tdm" --threads 16 > /dev/null 2>> "$A"
done
st bench
mkdir -p /tmp/bw
# the GPU decoding with its default weights (packed int4 + the bf16 copy), with bf16 weights
# (TANDEM_CUDA_PACKED=0), and the host's two cores decoding
for m in ${BENCH_MODELS:-l q}; do
  for v in cuda:1 cuda:0 cpu-avx512:1; do
    d=${v%:*} pk=${v#*:}
    TANDEM_CUDA_PACKED=$pk TANDEM_CUDA_PROFILE=1 timeout 200 "$B/tandem" bench /tmp/tb/$m.tdm -t 2 \
      --tests ${BENCH_TESTS:-pp512,tg128} --reps 3 --prefill cuda --decode $d --concurrency ${BENCH_CONC:-1,16,64} \
      --conc 448+64 --md "/tmp/bw/$m-$d-$pk.md" > "/tmp/bw/$m-$d-$pk.json" 2>> "$A"
    echo "-- $m: prefill cuda, decode $d (packed $pk)" >> "$A"
    grep -E '^\| ' "/tmp/bw/$m-$d-$pk.md" >> "$A"
  done
done
tar -C /tmp/bw -czf "$OUT/bench.tgz" .
;; esac
st done
