#!/bin/sh
# session 47, call 1: llama.cpp's CUDA backend (sm_90, flash attention kernels included) built on the
# GPU machine in tmp/llb (ignored, kept while the machine stays held), as far as one call's time
# allows; tandem's synthetic packages and the peer's BF16 GGUF models made beside it. Call 2 (s47b.sh)
# finishes the build and runs the side-by-side bench.
R=$(pwd); OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"; A=$OUT/a.txt; L=$R/tmp/llb; P=$R/tmp/pk
T0=$(date +%s); st() { echo "== $1 at $(( $(date +%s) - T0 )) s" >> "$A"; }
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total,driver_version --format=csv >> "$A" 2>&1
nproc >> "$A"; lscpu | grep -E "Model name" >> "$A"
mkdir -p $L $P /tmp/tb && tar -C $P -xJf tmp/cudaslim.tar.xz && tar -C $L -xJf tmp/peer.tar.xz
export LD_LIBRARY_PATH=$P/lib
( for m in l q; do case $m in l) like=llama-3.2-1b g=llama1b;; q) like=qwen2.5-0.5b g=qwen05b;; esac
    $P/bin/tandem synth --like $like -o /tmp/tb/$m > /dev/null 2>&1
    $P/bin/tandem convert /tmp/tb/$m -o $R/tmp/$m.tdm --threads 4 > /dev/null 2>&1
    mkdir -p $L/models; PYTHONPATH=$L/gguf-py python3 $L/make_synth_gguf.py $L/models $g > /dev/null 2>> $OUT/gg.txt
  done; echo models done >> $OUT/gg.txt ) &
st cmake
cd $L && cmake -S . -B b -G Ninja -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF \
    -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_COMMON=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF -DGGML_NATIVE=OFF \
    -DGGML_CCACHE=OFF > b.log 2>&1 || { tail -20 b.log >> $A; exit 1; }
st ninja
timeout 520 ninja -C b -j 16 llama >> b.log 2>&1; echo "ninja rc $?" >> $A
tail -2 b.log | cut -c1-200 >> $A
st stop
wait
ls -la $R/tmp/*.tdm $L/models >> $A 2>&1; cat $OUT/gg.txt >> $A 2>/dev/null
