#!/bin/sh
# tools/device-peer-cuda.sh: llama.cpp's CUDA build beside tandem's CUDA engine on the lent GPU machine
# (device tool, kind nvidia-h200), in one `tandem bench --peer` run (interleaved reps). Run from the
# repository root there with tmp/cuda.tar.xz (tools/device-cuda.sh's) and tmp/peer.tar.xz carried; the
# latter made here by
#   tar -C LLAMA_SRC -cJf tmp/peer.tar.xz CMakeLists.txt cmake ggml src include gguf-py vendor \
#       --exclude 'ggml/src/ggml-vulkan' ... (the other backends' folders) \
#       -C ../shared/peers llbench.c make_synth_gguf.py
# where LLAMA_SRC is the llama.cpp source that ships inside node-llama-cpp@3.21.1
# (../shared/peers/setup.sh clones it to $HOME/.cache/tandem-peers/llama.cpp). The machine builds
# llama.cpp for sm_90 (its CUDA 13 nvcc, CMake, ninja; a few minutes on 16 cores: the prebuilt
# CUDA libraries are over 100 MB, past what a call carries), llbench with tools/llbench_gpu.h (all
# layers offloaded), writes the synthetic GGUF models and quantizes them, then runs tandem bench on
# tandem's synthetic packages of the same shapes with the peer beside it.
# Writes $OUT/peer.txt (the log) and $OUT/*.md (tandem bench).
. tools/device-lib.sh
R=$(pwd); OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"; A=$OUT/peer.txt
P=/tmp/pk; L=/tmp/pp; mkdir -p $P $L && tar -C $P -xJf tmp/cuda.tar.xz && tar -C $L -xJf tmp/peer.tar.xz
export LD_LIBRARY_PATH=$P/lib TM_SHARED=$P/shared TANDEM_GEMV=avx512 LLB_MAX_FOREIGN=1
st() { echo "== $1 at $(date +%s)" >> "$A"; }
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total,driver_version --format=csv >> "$A" 2>&1
st build
dev_peer_build $L 16 || { tail -20 $L/b.log >> $A; exit 1; }
st models
mkdir -p $L/models /tmp/tb
for m in ${PEER_MODELS:-l q}; do
  case $m in l) g=llama1b like=llama-3.2-1b;; q) g=qwen05b like=qwen2.5-0.5b;; esac
  PYTHONPATH=$L/gguf-py python3 $L/make_synth_gguf.py $L/models $g >> $A 2>&1
  for q in q4_0 bf16; do [ $q = bf16 ] || $L/llbench quantize $L/models/$g-bf16.gguf $L/models/$g-$q.gguf $q 16 > /dev/null 2>> $A; done
  $P/bin/tandem synth --like $like -o /tmp/tb/$m > /dev/null 2>> $A
  $P/bin/tandem convert /tmp/tb/$m -o /tmp/tb/$m.tdm --threads 16 > /dev/null 2>> $A
  $P/bin/tandem convert /tmp/tb/$m -o /tmp/tb/$m-bf16.tdm --prefill-enc bf16 --decode-enc bf16 --threads 16 > /dev/null 2>> $A
done
st bench
for m in ${PEER_MODELS:-l q}; do
  case $m in l) g=llama1b;; q) g=qwen05b;; esac
  # int4 (the decode stage packed on the GPU) against Q4_0; bf16 against BF16
  for v in int4:$m.tdm:q4_0 bf16:$m-bf16.tdm:bf16; do
    IFS=: read tag pkg q <<X
$v
X
    TANDEM_CUDA_PACKED=1 timeout 280 $P/bin/tandem bench /tmp/tb/$pkg -t 2 --tests ${PEER_TESTS:-pp512,tg128} --reps 3 \
      --prefill cuda --decode cuda --peer llama.cpp --peer-model $L/models/$g-$q.gguf --peer-bin $L/llbench \
      --md "$OUT/$m-$tag.md" > /dev/null 2>> $A
    echo "-- $m $tag" >> $A
    grep -E '^\| ' "$OUT/$m-$tag.md" >> $A
  done
done
st done
