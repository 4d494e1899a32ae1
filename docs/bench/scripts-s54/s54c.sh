#!/bin/sh
# session 54, call 3: after call 2 (cuBLAS's grouped GEMM ran the experts one after another: pp512 at 0.40x
# llama.cpp's), the prefill's bf16 experts as batched GEMMs (cublasGemmBatchedEx over the experts padded to a
# common row count, cu_moe.h), and a decode step's router by cu_moe_router (batch-invariant). test_cuda_moe,
# test_engine_conf's CUDA runs, then on the Qwen3-30B-A3B shape cut to 8 layers: tandem bench with the batched
# GEMMs on (16) / within P/8 (1) / off (0), a profiled pp512 (TANDEM_CUDA_PROFILE=1), and beside llama.cpp's CUDA
# build (Q4_0 of the same shape) again. Carried: tmp/cuda54c.tar.xz, tmp/peer.tar.xz.
R=$(pwd); OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" build /tmp/tb; A=$OUT/a.txt; L=$R/tmp/llb; P=$R/tmp/pk; W=/tmp/w
mkdir -p $W $L $P; T0=$(date +%s); st() { echo "== $1 at $(( $(date +%s) - T0 )) s" >> "$A"; }
el() { echo $(( $(date +%s) - T0 )); }
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv >> "$A" 2>&1
tar -C $P -xJf tmp/cuda54c.tar.xz && tar -C $L -xJf tmp/peer.tar.xz
export LD_LIBRARY_PATH=$P/lib TM_SHARED=$P/shared TANDEM_GEMV=avx512 LLB_MAX_FOREIGN=100
( cd $L && cmake -S . -B b -G Ninja -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF \
    -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_COMMON=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF -DGGML_NATIVE=OFF \
    -DGGML_CCACHE=OFF > b.log 2>&1 && timeout 420 nice -n 10 ninja -C b -j 14 llama >> b.log 2>&1; echo "ninja rc $?" >> b.log ) &
BP=$!
B=$P/bin
( $B/tandem synth --like qwen3-30b-a3b --layers 8 -o /tmp/tb/q > /dev/null 2>> $A; \
  $B/tandem convert /tmp/tb/q -o /tmp/tb/q.tdm --threads 4 > $W/convert.txt 2>&1 ) &
SP=$!
( PYTHONPATH=$L/gguf-py python3 $R/tools/make_moe_gguf.py /tmp/tb/q-bf16.gguf 8 > $W/gguf.txt 2>&1 ) &
GP=$!
st test_cuda_moe
( timeout 120 $B/test_cuda_moe ) > $W/moe.txt 2>&1; grep -vE "^ok " $W/moe.txt | head -40 >> $A
st test_engine_conf
( TM_CONF_MODELS=llama3,qwen3_moe,qwen3 TM_CONF_ENGINE=cuda timeout 200 $B/test_engine_conf ) > $W/conf.txt 2>&1
grep -E "CHECK|passed|all [0-9]+ fixtures" $W/conf.txt | head -20 >> $A
wait $SP; st bench; tail -1 $W/convert.txt >> $A
bn() { TANDEM_CUDA_MOE_BATCHED=$1 timeout 90 $B/tandem bench /tmp/tb/q.tdm -t 4 --tests pp512,tg128 \
    --reps 3 --prefill cuda --decode cuda --md $W/b-$1-$2.md > $W/b-$1-$2.json 2>> $W/bench.err
  echo "batched=$1 round $2: $(grep -E '^\| (pp|tg)' $W/b-$1-$2.md | cut -d'|' -f2,4 | tr '\n' ' ')" >> $A; }
bn 16 1; bn 0 1; bn 1 1; bn 16 2; bn 0 2
TANDEM_CUDA_PROFILE=1 timeout 60 $B/tandem bench /tmp/tb/q.tdm -t 4 --tests pp512 --reps 2 --prefill cuda \
    --decode cuda > /dev/null 2> $W/prof.txt; grep "cuda profile" $W/prof.txt | cut -c1-400 >> $A
wait $GP; st "wait peer build"; wait $BP; tail -1 $L/b.log | cut -c1-200 >> $A
gcc -O2 -include "$R/tools/llbench_gpu.h" -I $L/include -I $L/ggml/include $L/llbench.c -o $L/llbench \
    -L $L/b/bin -lllama -lggml -lggml-base -Wl,-rpath,$L/b/bin >> $A 2>&1
st quantize
[ -x $L/llbench ] && timeout 120 $L/llbench quantize /tmp/tb/q-bf16.gguf /tmp/tb/q-q4_0.gguf q4_0 16 > $W/quant.txt 2>&1
rm -f /tmp/tb/q-bf16.gguf
st peer
for r in 1 2; do
  [ -f /tmp/tb/q-q4_0.gguf ] && [ $(el) -lt 500 ] || break
  timeout 75 $B/tandem bench /tmp/tb/q.tdm -t 4 --tests pp512,tg128 --reps 3 --prefill cuda --decode cuda \
    --peer llama.cpp --peer-model /tmp/tb/q-q4_0.gguf --peer-bin $L/llbench --md $W/peer$r.md > $W/peer$r.json 2>> $W/bench.err
  echo "-- round $r: tandem int4 vs llama.cpp Q4_0, both CUDA" >> $A; grep -E '^\| ' $W/peer$r.md >> $A
done
grep -iE "error|dropped|fail" $W/bench.err | head -10 | cut -c1-250 >> $A
cp $W/*.md $W/moe.txt $W/prof.txt $OUT/ 2>/dev/null
st done
