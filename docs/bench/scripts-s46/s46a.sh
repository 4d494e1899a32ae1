#!/bin/sh
# session 46, one call: CUDA tests of the merged fusions + packed-by-default build; sentence-transformers
# and transformers template references; llama.cpp's CUDA build beside tandem (int4 vs Q4_0); packed vs bf16
R=$(pwd); OUT=${OUT:-/tmp/out}; W=/tmp/w; mkdir -p "$OUT" build $W; A=$OUT/cuda.txt
T0=$(date +%s); st() { echo "== $1 at $(( $(date +%s) - T0 )) s" >> "$A"; }
P=/tmp/pk; L=/tmp/pp; mkdir -p $P $L && tar -C $P -xJf tmp/cuda.tar.xz
[ -e tmp/peer.tar.xz ] && tar -C $L -xJf tmp/peer.tar.xz
export LD_LIBRARY_PATH=$P/lib TM_SHARED=$P/shared TANDEM_GEMV=avx512
B=$P/bin
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total,driver_version --format=csv >> "$A" 2>&1
lscpu | grep -iE "model name|^CPU\(s\)" >> "$A"
[ -e tmp/peer.tar.xz ] && ( cd $L && cmake -S . -B b -G Ninja -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF \
    -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_COMMON=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF -DGGML_NATIVE=OFF \
    -DGGML_CCACHE=OFF > b.log 2>&1 && nice -n 19 ninja -C b -j 13 llama >> b.log 2>&1 && \
  gcc -O2 -include "$R/tools/llbench_gpu.h" -I include -I ggml/include llbench.c -o llbench \
    -L b/bin -lllama -lggml -lggml-base -Wl,-rpath,$L/b/bin >> b.log 2>&1 && touch $L/BUILT ) &
( OMP_NUM_THREADS=2 timeout 300 python3 tools/gen_embed_refs.py $P/shared/conformance/models $OUT/embed_refs.json > $W/st.txt 2>&1
  cp -r tmp/tpl /tmp/tpl && timeout 200 python3 tools/gen_template_refs.py /tmp/tpl > $W/tpl.txt 2>&1; tar -C /tmp/tpl -czf $OUT/tpl.tgz . ) &
STP=$!
st tests
( timeout 60 $B/test_cuda_gemv ) > $W/t_gemv.txt 2>&1; tail -2 $W/t_gemv.txt >> $A
( timeout 150 $B/test_cuda_decode ) > $W/t_dec.txt 2>&1; tail -2 $W/t_dec.txt >> $A
( timeout 120 $B/test_cuda ) > $W/t_cuda.txt 2>&1; tail -2 $W/t_cuda.txt >> $A
( TM_CONF_ENGINE=cuda timeout 200 $B/test_engine_conf ) 2>&1 | grep -v ' fixture: ' > $W/t_conf.txt; tail -2 $W/t_conf.txt >> $A
grep -h "CHECK\|FAIL" $W/t_*.txt | head -30 | cut -c1-300 >> $A; cat $W/t_*.txt > $OUT/tests.txt
st packages
mkdir -p /tmp/tb
for m in l q; do
  case $m in l) like=llama-3.2-1b;; q) like=qwen2.5-0.5b;; esac
  $B/tandem synth --like $like -o /tmp/tb/$m > /dev/null 2>> $A
  $B/tandem convert /tmp/tb/$m -o /tmp/tb/$m.tdm --threads 4 > /dev/null 2>> $A
done
wait $STP; tail -8 $W/st.txt >> $A; grep -c "'ok'" $W/tpl.txt >> $A; tail -30 $W/tpl.txt | cut -c1-250 >> $A
st waitbuild
while [ ! -e $L/BUILT ] && [ $(( $(date +%s) - T0 )) -lt 380 ] && pgrep -f "ninja -C b" > /dev/null; do sleep 5; done
st built; tail -3 $L/b.log | cut -c1-300 >> $A
if [ -e $L/BUILT ]; then
  mkdir -p $L/models
  for g in llama1b qwen05b; do
    PYTHONPATH=$L/gguf-py python3 $L/make_synth_gguf.py $L/models $g >> $W/gg.txt 2>&1
    $L/llbench quantize $L/models/$g-bf16.gguf $L/models/$g-q4_0.gguf q4_0 16 > /dev/null 2>> $W/gg.txt
  done
  st peerbench
  for m in l q; do case $m in l) g=llama1b;; q) g=qwen05b;; esac
    LLB_MAX_FOREIGN=1 timeout 90 $B/tandem bench /tmp/tb/$m.tdm -t 2 --tests pp512,tg128 --reps 3 --prefill cuda --decode cuda \
      --peer llama.cpp --peer-model $L/models/$g-q4_0.gguf --peer-bin $L/llbench --md $W/p-$m.md > $W/p-$m.json 2>> $W/bench.err
    echo "-- $m int4 packed vs llama.cpp Q4_0 (CUDA)" >> $A; grep -E '^\| ' $W/p-$m.md >> $A
  done
fi
st packed
for m in l q; do for pk in 0 1; do
  TANDEM_CUDA_PACKED=$pk TANDEM_CUDA_PROFILE=1 timeout 45 $B/tandem bench /tmp/tb/$m.tdm -t 2 --tests tg128 --reps 3 \
    --prefill cuda --decode cuda --concurrency 1,64 --conc 448+64 --md $W/b-$m-$pk.md > $W/b-$m-$pk.json 2>> $W/bench.err
  echo "-- $m packed=$pk" >> $A; grep -E '^\| ' $W/b-$m-$pk.md >> $A
done; done
grep -i "profile\|graph" $W/bench.err | head -12 | cut -c1-300 >> $A
tar -C $W -czf $OUT/w.tgz .
st done
