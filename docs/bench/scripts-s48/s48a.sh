#!/bin/sh
# session 48, call 1: llama.cpp's CUDA backend (sm_90) built in the background in tmp/llb (ignored, kept
# while the machine stays held; call 2 finishes it), while the CUDA engine's tests run on the GPU with the
# FlashAttention-2-style prefill attention (test_cuda_attn, test_cuda, test_cuda_decode, test_engine_conf's
# CUDA runs); tandem's synthetic packages and the peer's GGUF models made in tmp/ for call 2.
# Carried: tmp/cuda48.tar.xz (bin/: tandem and the four tests, sm_90 only; lib/; shared/conformance/models)
# and tmp/peer.tar.xz (tools/device-peer-cuda.sh says how it is made).
# build/ and /tmp/tb were missing in the run itself (test_cuda and the packages failed there; call 2 made
# them): made here so that a rerun works
R=$(pwd); OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" build /tmp/tb; A=$OUT/a.txt; L=$R/tmp/llb; P=$R/tmp/pk
T0=$(date +%s); st() { echo "== $1 at $(( $(date +%s) - T0 )) s" >> "$A"; }
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total,driver_version --format=csv >> "$A" 2>&1
nproc >> "$A"; lscpu | grep -E "Model name" >> "$A"
mkdir -p $L $P && tar -C $P -xJf tmp/cuda48.tar.xz && tar -C $L -xJf tmp/peer.tar.xz
export LD_LIBRARY_PATH=$P/lib TM_SHARED=$P/shared TANDEM_GEMV=avx512
( cd $L && cmake -S . -B b -G Ninja -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF \
    -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_COMMON=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF -DGGML_NATIVE=OFF \
    -DGGML_CCACHE=OFF > b.log 2>&1 && timeout 560 nice -n 10 ninja -C b -j 13 llama >> b.log 2>&1; echo "ninja rc $?" >> b.log ) &
st tests
B=$P/bin
( timeout 150 $B/test_cuda_attn ) > $OUT/attn.txt 2>&1; tail -3 $OUT/attn.txt >> $A
( timeout 100 $B/test_cuda ) 2>&1 | grep -E 'CHECK|passed|SKIP' | head -20 >> $A
( timeout 100 $B/test_cuda_decode ) 2>&1 | grep -E 'CHECK|passed|SKIP' | head -20 >> $A
st conf
( TM_CONF_ENGINE=cuda timeout 240 $B/test_engine_conf ) > $OUT/conf.txt 2>&1; grep -v ' fixture: ' $OUT/conf.txt | tail -25 >> $A
st packages
for m in l q; do case $m in l) like=llama-3.2-1b g=llama1b;; q) like=qwen2.5-0.5b g=qwen05b;; esac
  $B/tandem synth --like $like -o /tmp/tb/$m > /dev/null 2>> $A
  $B/tandem convert /tmp/tb/$m -o $R/tmp/$m.tdm --threads 3 > /dev/null 2>> $A
  mkdir -p $L/models; PYTHONPATH=$L/gguf-py python3 $L/make_synth_gguf.py $L/models $g > /dev/null 2>> $A
done
st "packages done"
# a first look at the new attention's speed (the build beside it: not for the record)
TANDEM_CUDA_PROFILE=1 timeout 100 $B/tandem bench $R/tmp/l.tdm -t 2 --tests pp512,pp4096,pp16384 --reps 1 --prefill cuda \
  --decode cuda --md $OUT/l-first.md > /dev/null 2> $OUT/l-first.err; grep -E '^\| ' $OUT/l-first.md >> $A
grep -iE "attn|attention|gemm" $OUT/l-first.err | head -8 >> $A
st wait
wait
tail -3 $L/b.log | cut -c1-200 >> $A; ls -la $R/tmp/*.tdm $L/models >> $A 2>&1
st done
