#!/bin/sh
# session 52, call 2: the shipped CUDA decode (res-preload.diff applied; the fused residual where the GEMV's launch
# has a block per SM and at most 2 warps a row set, fuse_here) on the GPU: its tests, tg128 by TANDEM_CUDA_FUSE_RES
# (the rule, 1, 0; 2 rounds, the second reversed), and tandem bench --peer llama.cpp (pp512, tg128, 3 reps; the
# peer's CUDA build as scripts-s51/s51a.sh makes it). Carried: tmp/cuda52d.tar.xz, tmp/peer.tar.xz.
R=$(pwd); OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" build /tmp/tb; A=$OUT/a.txt; L=$R/tmp/llb; P=$R/tmp/pk; W=/tmp/w
mkdir -p $W; T0=$(date +%s); st() { echo "== $1 at $(( $(date +%s) - T0 )) s" >> "$A"; }
el() { echo $(( $(date +%s) - T0 )); }
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total,driver_version --format=csv >> "$A" 2>&1
mkdir -p $L $P && tar -C $P -xJf tmp/cuda52d.tar.xz && tar -C $L -xJf tmp/peer.tar.xz
export LD_LIBRARY_PATH=$P/lib TM_SHARED=$P/shared TANDEM_GEMV=avx512 LLB_MAX_FOREIGN=1
( cd $L && cmake -S . -B b -G Ninja -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF \
    -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_COMMON=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF -DGGML_NATIVE=OFF \
    -DGGML_CCACHE=OFF > b.log 2>&1 && timeout 240 nice -n 10 ninja -C b -j 12 llama >> b.log 2>&1; echo "ninja rc $?" >> b.log ) &
B=$P/bin
st tests
( timeout 150 $B/test_cuda_decode ) > $W/test_cuda_decode.txt 2>&1
grep -E "CHECK|passed|SKIP|FUSE_RES|argmax kernel" $W/test_cuda_decode.txt | head -30 >> $A
( timeout 60 $B/test_cuda ) > $W/test_cuda.txt 2>&1; grep -E "CHECK|passed|SKIP" $W/test_cuda.txt | head -8 >> $A
st packages
for m in l q; do case $m in l) like=llama-3.2-1b g=llama1b;; q) like=qwen2.5-0.5b g=qwen05b;; esac
  $B/tandem synth --like $like -o /tmp/tb/$m > /dev/null 2>> $A
  $B/tandem convert /tmp/tb/$m -o $R/tmp/$m.tdm --threads 4 > /dev/null 2>> $A
  mkdir -p $L/models; PYTHONPATH=$L/gguf-py python3 $L/make_synth_gguf.py $L/models $g > /dev/null 2>> $A
done
st decode
dec() { r=$1; vs="new new1 new0"; [ $r = 2 ] && vs="new0 new1 new"
  for m in l q; do for v in $vs; do
  e=""; case $v in *1) e="TANDEM_CUDA_FUSE_RES=1";; *0) e="TANDEM_CUDA_FUSE_RES=0";; esac
  env $e timeout 60 $B/tandem bench $R/tmp/$m.tdm -t 2 --tests tg128 --reps 3 --prefill cuda --decode cuda \
    --md $W/d-$m-$v-$r.md > $W/d-$m-$v-$r.json 2>> $W/bench.err
  echo "$r $m $v $(grep -E '^\| tg128' $W/d-$m-$v-$r.md | cut -d'|' -f4)" >> $A
done; done; }
dec 1
st wait
wait
tail -1 $L/b.log | cut -c1-200 >> $A
gcc -O2 -include "$R/tools/llbench_gpu.h" -I $L/include -I $L/ggml/include $L/llbench.c -o $L/llbench \
    -L $L/b/bin -lllama -lggml -lggml-base -Wl,-rpath,$L/b/bin >> $A 2>&1
for g in llama1b qwen05b; do [ -x $L/llbench ] && $L/llbench quantize $L/models/$g-bf16.gguf $L/models/$g-q4_0.gguf q4_0 16 > /dev/null 2>&1; done
st peer
for m in l q; do case $m in l) g=llama1b;; q) g=qwen05b;; esac
  [ -x $L/llbench ] && [ $(el) -lt 290 ] || break
  timeout 70 $B/tandem bench $R/tmp/$m.tdm -t 2 --tests pp512,tg128 --reps 3 --prefill cuda --decode cuda \
    --peer llama.cpp --peer-model $L/models/$g-q4_0.gguf --peer-bin $L/llbench --md $W/p-$m.md > $W/p-$m.json 2>> $W/bench.err
  echo "-- $m: tandem int4 vs llama.cpp Q4_0, both CUDA" >> $A; grep -E '^\| ' $W/p-$m.md >> $A
  st "peer $m"
done
if [ $(el) -lt 300 ]; then st "decode 2"; dec 2; fi
grep -iE "error|dropped" $W/bench.err | head -10 | cut -c1-250 >> $A
tar -C $W -czf $OUT/w.tgz .
st done
