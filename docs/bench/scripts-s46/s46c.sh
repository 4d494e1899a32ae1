#!/bin/sh
# session 46, call 3: llama.cpp's CUDA build beside tandem's CUDA engine (int4 packed + bf16 copy vs Q4_0)
R=$(pwd); OUT=${OUT:-/tmp/out}; W=/tmp/w; mkdir -p "$OUT" $W; A=$OUT/peer.txt
T0=$(date +%s); st() { echo "== $1 at $(( $(date +%s) - T0 )) s" >> "$A"; }
P=/tmp/pk; L=/tmp/pp; mkdir -p $P $L && tar -C $P -xJf tmp/cudaslim.tar.xz && tar -C $L -xJf tmp/peer.tar.xz
export LD_LIBRARY_PATH=$P/lib
B=$P/bin
mkdir -p /tmp/tb
( for m in q l; do case $m in l) like=llama-3.2-1b;; q) like=qwen2.5-0.5b;; esac
  $B/tandem synth --like $like -o /tmp/tb/$m > /dev/null 2>&1; $B/tandem convert /tmp/tb/$m -o /tmp/tb/$m.tdm --threads 2 > /dev/null 2>&1; done ) &
st build
( cd $L && cmake -S . -B b -G Ninja -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF \
    -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_COMMON=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF -DGGML_NATIVE=OFF \
    -DGGML_CCACHE=OFF > b.log 2>&1 && timeout 420 ninja -C b -j 16 llama >> b.log 2>&1 && \
  gcc -O2 -include "$R/tools/llbench_gpu.h" -I include -I ggml/include llbench.c -o llbench \
    -L b/bin -lllama -lggml -lggml-base -Wl,-rpath,$L/b/bin >> b.log 2>&1 ) || { tail -20 $L/b.log | cut -c1-300 >> $A; }
st built
[ -x $L/llbench ] || exit 0
mkdir -p $L/models
for m in q l; do case $m in l) g=llama1b;; q) g=qwen05b;; esac
  [ $(( $(date +%s) - T0 )) -lt 500 ] || break
  PYTHONPATH=$L/gguf-py python3 $L/make_synth_gguf.py $L/models $g > /dev/null 2>> $W/gg.txt
  $L/llbench quantize $L/models/$g-bf16.gguf $L/models/$g-q4_0.gguf q4_0 16 > /dev/null 2>> $W/gg.txt
  st "peer $m"
  LLB_MAX_FOREIGN=1 timeout 75 $B/tandem bench /tmp/tb/$m.tdm -t 2 --tests pp512,tg128 --reps 3 --prefill cuda --decode cuda \
    --peer llama.cpp --peer-model $L/models/$g-q4_0.gguf --peer-bin $L/llbench --md $W/p-$m.md > $W/p-$m.json 2>> $W/bench.err
  echo "-- $m: tandem int4 (packed + bf16 copy) vs llama.cpp Q4_0, both CUDA" >> $A; grep -E '^\| ' $W/p-$m.md >> $A
done
tail -5 $W/gg.txt >> $A; grep -i "RESULT\|error" $W/bench.err | head -10 | cut -c1-250 >> $A
tar -C $W -czf $OUT/w.tgz .
st done
