#!/bin/sh
# session 52, call 1: the mended GEMV of ea477e4 (never run on a GPU) and docs/bench/scripts-s51/res-preload.diff
# (the fused residual's x read right after the PDL wait, fenced only by the storing threads) on the GPU.
#   bin/tandem, test_cuda_decode: ea477e4 (fused residual by the launch's size: >= 1 block per SM)
#   bin/tandem_pre, test_cuda_decode_pre: ea477e4 + res-preload.diff
#   1. llama.cpp's CUDA backend built in the background (as scripts-s51/s51a.sh);
#   2. both packages (Llama-3.2-1B and Qwen2.5-0.5B shapes, default encodings) and the peer's GGUFs;
#   3. the GPU tests, both builds (switch_exact: fused vs unfused bit-identical);
#   4. tg128 by variant, interleaved: new (the rule), new1 / new0 (TANDEM_CUDA_FUSE_RES=1 / 0), pre (the rule),
#      pre1 (fused everywhere);
#   5. tandem bench --peer llama.cpp (pp512, tg128, 3 reps): new, pre1; each model;
#   6. the variants again in the reverse order where time is left.
R=$(pwd); OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" build /tmp/tb; A=$OUT/a.txt; L=$R/tmp/llb; P=$R/tmp/pk; W=/tmp/w
mkdir -p $W; T0=$(date +%s); st() { echo "== $1 at $(( $(date +%s) - T0 )) s" >> "$A"; }
el() { echo $(( $(date +%s) - T0 )); }
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total,driver_version --format=csv >> "$A" 2>&1
mkdir -p $L $P && tar -C $P -xJf tmp/cuda52a.tar.xz && tar -C $L -xJf tmp/peer.tar.xz
export LD_LIBRARY_PATH=$P/lib TM_SHARED=$P/shared TANDEM_GEMV=avx512 LLB_MAX_FOREIGN=1
( cd $L && cmake -S . -B b -G Ninja -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF \
    -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_COMMON=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF -DGGML_NATIVE=OFF \
    -DGGML_CCACHE=OFF > b.log 2>&1 && timeout 400 nice -n 10 ninja -C b -j 12 llama >> b.log 2>&1; echo "ninja rc $?" >> b.log ) &
B=$P/bin
st tests
for t in test_cuda_decode test_cuda_decode_pre; do
  ( timeout 150 $B/$t ) > $W/$t.txt 2>&1; echo "-- $t" >> $A
  grep -E "CHECK|passed|SKIP|FUSE_RES|argmax kernel" $W/$t.txt | head -30 >> $A
done
( timeout 60 $B/test_cuda ) > $W/test_cuda.txt 2>&1; grep -E "CHECK|passed|SKIP" $W/test_cuda.txt | head -8 >> $A
st packages
for m in l q; do case $m in l) like=llama-3.2-1b g=llama1b;; q) like=qwen2.5-0.5b g=qwen05b;; esac
  $B/tandem synth --like $like -o /tmp/tb/$m > /dev/null 2>> $A
  $B/tandem convert /tmp/tb/$m -o $R/tmp/$m.tdm --threads 4 > /dev/null 2>> $A
  mkdir -p $L/models; PYTHONPATH=$L/gguf-py python3 $L/make_synth_gguf.py $L/models $g > /dev/null 2>> $A
done
st decode
dec() { r=$1; vs="new new1 new0 pre pre1"; [ $r = 2 ] && vs="pre1 pre new0 new1 new"
  for m in l q; do for v in $vs; do
  x=$B/tandem; e=""; case $v in pre*) x=$B/tandem_pre;; esac
  case $v in *1) e="TANDEM_CUDA_FUSE_RES=1";; *0) e="TANDEM_CUDA_FUSE_RES=0";; esac
  env $e timeout 60 $x bench $R/tmp/$m.tdm -t 2 --tests tg128 --reps 3 --prefill cuda --decode cuda \
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
for v in new pre1; do x=$B/tandem; e=""; [ $v = pre1 ] && { x=$B/tandem_pre; e="TANDEM_CUDA_FUSE_RES=1"; }
  for m in l q; do case $m in l) g=llama1b;; q) g=qwen05b;; esac
    [ -x $L/llbench ] && [ $(el) -lt 500 ] || break
    env $e timeout 70 $x bench $R/tmp/$m.tdm -t 2 --tests pp512,tg128 --reps 3 --prefill cuda --decode cuda \
      --peer llama.cpp --peer-model $L/models/$g-q4_0.gguf --peer-bin $L/llbench --md $W/p-$v-$m.md > $W/p-$v-$m.json 2>> $W/bench.err
    echo "-- $v $m: tandem int4 vs llama.cpp Q4_0, both CUDA" >> $A; grep -E '^\| ' $W/p-$v-$m.md >> $A
    st "peer $v $m"
  done
done
if [ $(el) -lt 470 ]; then st "decode 2"; dec 2; fi
grep -iE "error|dropped" $W/bench.err | head -10 | cut -c1-250 >> $A
tar -C $W -czf $OUT/w.tgz .
st done
