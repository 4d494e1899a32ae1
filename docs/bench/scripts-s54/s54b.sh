#!/bin/sh
# session 54, call 2: the mixture-of-experts layers on the CUDA engine after call 1: the pick a warp a row (call 1's
# thread a row was most of a decode step), the bf16 experts' products as grouped GEMMs (cublasGemmGroupedBatchedEx)
# in the prefill. test_cuda_moe (the pick kernel against the host's; the synth presets' MoE models; the grouped GEMMs
# against the loop), test_engine_conf's CUDA runs; then, on a Qwen3-30B-A3B shape cut to 8 of its 48 layers, tandem
# bench (int8 prefill, int4 g64 decode, GPU in both roles) with the indexed decode on / off and the grouped GEMMs on
# / off, and beside llama.cpp's CUDA build (Q4_0 of the same shape: tools/make_moe_gguf.py, quantized by llbench).
# Carried: tmp/cuda54b.tar.xz (bin/, lib/, shared/), tmp/peer.tar.xz (llama.cpp's sources, trimmed, llbench.c).
R=$(pwd); OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" build /tmp/tb; A=$OUT/a.txt; L=$R/tmp/llb; P=$R/tmp/pk; W=/tmp/w
mkdir -p $W $L $P; T0=$(date +%s); st() { echo "== $1 at $(( $(date +%s) - T0 )) s" >> "$A"; }
el() { echo $(( $(date +%s) - T0 )); }
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv >> "$A" 2>&1
tar -C $P -xJf tmp/cuda54b.tar.xz && tar -C $L -xJf tmp/peer.tar.xz
export LD_LIBRARY_PATH=$P/lib TM_SHARED=$P/shared TANDEM_GEMV=avx512 LLB_MAX_FOREIGN=100
( cd $L && cmake -S . -B b -G Ninja -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF \
    -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_COMMON=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF -DGGML_NATIVE=OFF \
    -DGGML_CCACHE=OFF > b.log 2>&1 && timeout 420 nice -n 10 ninja -C b -j 14 llama >> b.log 2>&1; echo "ninja rc $?" >> b.log ) &
BP=$!
B=$P/bin
st test_cuda_moe
( timeout 120 $B/test_cuda_moe ) > $W/moe.txt 2>&1; grep -vE "^ok " $W/moe.txt | head -40 >> $A
st models
( $B/tandem synth --like qwen3-30b-a3b --layers 8 -o /tmp/tb/q > /dev/null 2>> $A; \
  $B/tandem convert /tmp/tb/q -o /tmp/tb/q.tdm --threads 4 > $W/convert.txt 2>&1 ) &
SP=$!
( PYTHONPATH=$L/gguf-py python3 $R/tools/make_moe_gguf.py /tmp/tb/q-bf16.gguf 8 > $W/gguf.txt 2>&1 ) &
GP=$!
st test_engine_conf
( TM_CONF_MODELS=llama3,qwen3_moe,qwen3 TM_CONF_ENGINE=cuda timeout 200 $B/test_engine_conf ) > $W/conf.txt 2>&1
grep -E "CHECK|passed|qwen3_moe|all [0-9]+ fixtures" $W/conf.txt | head -30 >> $A
grep -E "^cuda.*(mixtral|gpt_oss|qwen2_moe|olmoe|granitemoe|glm4_moe|dots1|ernie4_5_moe)" $W/conf.txt | head -60 >> $A
wait $SP; st bench; tail -1 $W/convert.txt >> $A
bn() { TANDEM_CUDA_MOE_IX=$1 TANDEM_CUDA_MOE_GROUPED=$2 timeout 90 $B/tandem bench /tmp/tb/q.tdm -t 4 --tests pp512,tg128 \
    --reps 3 --prefill cuda --decode cuda --md $W/b-$1$2-$3.md > $W/b-$1$2-$3.json 2>> $W/bench.err
  echo "ix=$1 grouped=$2 round $3: $(grep -E '^\| (pp|tg)' $W/b-$1$2-$3.md | cut -d'|' -f2,4 | tr '\n' ' ')" >> $A; }
bn 1 1 1; bn 0 1 1; bn 1 0 1
wait $GP; st gguf; cat $W/gguf.txt | tail -2 >> $A; ls -la /tmp/tb/q-bf16.gguf >> $A
bn 1 1 2; bn 0 0 2
st "wait peer build"; wait $BP; tail -1 $L/b.log | cut -c1-200 >> $A
gcc -O2 -include "$R/tools/llbench_gpu.h" -I $L/include -I $L/ggml/include $L/llbench.c -o $L/llbench \
    -L $L/b/bin -lllama -lggml -lggml-base -Wl,-rpath,$L/b/bin >> $A 2>&1
st quantize
[ -x $L/llbench ] && timeout 120 $L/llbench quantize /tmp/tb/q-bf16.gguf /tmp/tb/q-q4_0.gguf q4_0 16 > $W/quant.txt 2>&1
ls -la /tmp/tb/q-q4_0.gguf >> $A 2>&1; rm -f /tmp/tb/q-bf16.gguf
st peer
if [ -f /tmp/tb/q-q4_0.gguf ] && [ $(el) -lt 520 ]; then
  timeout 75 $B/tandem bench /tmp/tb/q.tdm -t 4 --tests pp512,tg128 --reps 3 --prefill cuda --decode cuda \
    --peer llama.cpp --peer-model /tmp/tb/q-q4_0.gguf --peer-bin $L/llbench --md $W/peer.md > $W/peer.json 2>> $W/bench.err
  echo "-- tandem int4 vs llama.cpp Q4_0, both CUDA" >> $A; grep -E '^\| ' $W/peer.md >> $A
fi
st test_cuda_decode
[ $(el) -lt 540 ] && ( timeout 50 $B/test_cuda_decode ) > $W/dec.txt 2>&1; grep -E "CHECK|passed|SKIP" $W/dec.txt | head -6 >> $A
grep -iE "error|dropped|fail" $W/bench.err | head -10 | cut -c1-250 >> $A
cp $W/*.md $W/moe.txt $OUT/ 2>/dev/null
st done
