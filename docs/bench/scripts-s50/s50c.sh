#!/bin/sh
# session 50, call 3: the session's final CUDA build against session 49's (843ed12), on one machine:
#   1. llama.cpp's CUDA backend built in the background (tmp/llb);
#   2. the GPU tests of the final build: test_cuda_decode (PDL on / off bit-identical, the page-locked
#      logits), test_cuda, test_cuda_gemv, test_cuda_attn;
#   3. tandem bench tg128, interleaved, both shapes, 2 rounds: old (session 49), new (defaults: PDL, the
#      segment merge in the attention's last block, page-locked logits, the vectorized greedy argmax),
#      new with TANDEM_CUDA_PDL=0, new with TANDEM_CUDA_PINNED=0;
#   4. with the peer built: tandem bench --peer llama.cpp (pp512, tg128), the new build;
#   5. test_engine_conf on the cuda engine (before 4, which runs while time is left).
# Carried: tmp/cuda50c.tar.xz (bin/ with tandem_old, lib/, shared/conformance/models), tmp/peer.tar.xz.
R=$(pwd); OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" build /tmp/tb; A=$OUT/c.txt; L=$R/tmp/llb; P=$R/tmp/pk; W=/tmp/w
mkdir -p $W; T0=$(date +%s); st() { echo "== $1 at $(( $(date +%s) - T0 )) s" >> "$A"; }
el() { echo $(( $(date +%s) - T0 )); }
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total,driver_version --format=csv >> "$A" 2>&1
mkdir -p $L $P && tar -C $P -xJf tmp/cuda50c.tar.xz && tar -C $L -xJf tmp/peer.tar.xz
export LD_LIBRARY_PATH=$P/lib TM_SHARED=$P/shared TANDEM_GEMV=avx512 LLB_MAX_FOREIGN=1
( cd $L && cmake -S . -B b -G Ninja -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF \
    -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_COMMON=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF -DGGML_NATIVE=OFF \
    -DGGML_CCACHE=OFF > b.log 2>&1 && timeout 300 nice -n 10 ninja -C b -j 12 llama >> b.log 2>&1; echo "ninja rc $?" >> b.log ) &
B=$P/bin
st tests
( timeout 150 $B/test_cuda_decode ) > $W/test_cuda_decode.txt 2>&1; grep -E "CHECK|passed|SKIP|PDL|^--" $W/test_cuda_decode.txt | head -30 >> $A
for t in test_cuda test_cuda_gemv test_cuda_attn; do
  ( timeout 100 $B/$t ) > $W/$t.txt 2>&1; grep -E "CHECK|passed|SKIP" $W/$t.txt | head -12 >> $A
done
st packages
for m in l q; do case $m in l) like=llama-3.2-1b g=llama1b;; q) like=qwen2.5-0.5b g=qwen05b;; esac
  $B/tandem synth --like $like -o /tmp/tb/$m > /dev/null 2>> $A
  $B/tandem convert /tmp/tb/$m -o $R/tmp/$m.tdm --threads 8 > /dev/null 2>> $A
  mkdir -p $L/models; PYTHONPATH=$L/gguf-py python3 $L/make_synth_gguf.py $L/models $g > /dev/null 2>> $A
done
st decode
for r in 1 2; do for m in l q; do for v in new old nopdl nopin; do
  x=$B/tandem; e=""
  case $v in old) x=$B/tandem_old;; nopdl) e="TANDEM_CUDA_PDL=0";; nopin) e="TANDEM_CUDA_PINNED=0";; esac
  env $e timeout 60 $x bench $R/tmp/$m.tdm -t 2 --tests tg128 --reps 3 --prefill cuda --decode cuda \
    --md $W/d-$m-$v-$r.md > $W/d-$m-$v-$r.json 2> $W/d-$m-$v-$r.err
  echo "$r $m $v $(grep -E '^\| tg128' $W/d-$m-$v-$r.md | cut -d'|' -f4)" >> $A
done; done; done
st conf
( cd $R && TM_CONF_ENGINE=cuda timeout 60 $B/test_engine_conf ) > $W/conf.txt 2>&1
grep -v ' fixture: ' $W/conf.txt | tail -15 >> $A
st wait
wait
tail -1 $L/b.log | cut -c1-200 >> $A
gcc -O2 -include "$R/tools/llbench_gpu.h" -I $L/include -I $L/ggml/include $L/llbench.c -o $L/llbench \
    -L $L/b/bin -lllama -lggml -lggml-base -Wl,-rpath,$L/b/bin >> $A 2>&1
for g in llama1b qwen05b; do [ -x $L/llbench ] && $L/llbench quantize $L/models/$g-bf16.gguf $L/models/$g-q4_0.gguf q4_0 16 > /dev/null 2>&1; done
st peer
for mv in l:new q:new; do m=${mv%:*} v=${mv#*:}; case $m in l) g=llama1b;; q) g=qwen05b;; esac
  [ -x $L/llbench ] && [ $(el) -lt 360 ] || break
  x=$B/tandem; [ $v = old ] && x=$B/tandem_old
  timeout 60 $x bench $R/tmp/$m.tdm -t 2 --tests pp512,tg128 --reps 3 --prefill cuda --decode cuda \
    --peer llama.cpp --peer-model $L/models/$g-q4_0.gguf --peer-bin $L/llbench --md $W/p-$m-$v.md > $W/p-$m-$v.json 2>> $W/bench.err
  echo "-- $m, $v: tandem int4 vs llama.cpp Q4_0, both CUDA" >> $A; grep -E '^\| ' $W/p-$m-$v.md >> $A
  st "peer $m $v"
done
grep -iE "error|RESULT|dropped" $W/bench.err | head -10 | cut -c1-250 >> $A
tar -C $W -czf $OUT/w.tgz .
st done
