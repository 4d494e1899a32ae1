#!/bin/sh
# session 49, call 1: the CUDA decode GEMV without int-to-float conversions, with its K split over warps and
# reading int6 natively (cu_gemv.cu, cu_mat.c) against session 48's (int6 widened to int8), in one call:
#   1. llama.cpp's CUDA backend (sm_90) built in the background in tmp/llb;
#   2. test_cuda_gemv (the new kernel against the scalar reference, every split forced);
#   3. tools/cu_gemv_bench.c by shape, the old kernel's build (bin/cu_gemv_bench_old: session 48's cu_gemv.o
#      and cu_mat.o linked in) and the new, interleaved by round; the new with each K split forced too;
#   4. test_cuda_decode, test_cuda; tandem's synthetic packages, the peer's GGUFs;
#   5. tandem bench tg128, bin/tandem_old (session 48's cu_gemv.o and cu_mat.o, the rest this build) against
#      bin/tandem, interleaved, both shapes; the decode step's GPU time by category (graphs off);
#   6. with the peer built, tandem bench --peer llama.cpp (pp512, tg128).
# Carried: tmp/cuda49.tar.xz (bin/, lib/; no conformance models: the 64 MiB a call carries), tmp/peer.tar.xz.
R=$(pwd); OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" build /tmp/tb; A=$OUT/a.txt; L=$R/tmp/llb; P=$R/tmp/pk; W=/tmp/w
mkdir -p $W; T0=$(date +%s); st() { echo "== $1 at $(( $(date +%s) - T0 )) s" >> "$A"; }
el() { echo $(( $(date +%s) - T0 )); }
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total,driver_version --format=csv >> "$A" 2>&1
nproc >> "$A"; lscpu | grep -E "Model name" >> "$A"
mkdir -p $L $P && tar -C $P -xJf tmp/cuda49.tar.xz && tar -C $L -xJf tmp/peer.tar.xz
export LD_LIBRARY_PATH=$P/lib TM_SHARED=$P/shared TANDEM_GEMV=avx512 LLB_MAX_FOREIGN=1
( cd $L && cmake -S . -B b -G Ninja -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF \
    -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_COMMON=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF -DGGML_NATIVE=OFF \
    -DGGML_CCACHE=OFF > b.log 2>&1 && timeout 470 nice -n 10 ninja -C b -j 12 llama >> b.log 2>&1; echo "ninja rc $?" >> b.log ) &
B=$P/bin
st test_cuda_gemv
timeout 150 $B/test_cuda_gemv > $W/test-gemv.txt 2>&1; grep -E "CHECK|passed|SKIP" $W/test-gemv.txt | head -20 >> $A
st cu_gemv_bench
for r in 1 2; do
  timeout 60 $B/cu_gemv_bench_old -r 15 > $W/gb-old-$r.txt 2>&1
  timeout 90 $B/cu_gemv_bench -r 15 -k 0,1,2,4,8 > $W/gb-new-$r.txt 2>&1
done
cat $W/gb-old-1.txt $W/gb-new-1.txt >> $A
st tests
( timeout 100 $B/test_cuda_decode ) 2>&1 | grep -E 'CHECK|passed|SKIP' | head -20 >> $A
( timeout 100 $B/test_cuda ) 2>&1 | grep -E 'CHECK|passed|SKIP' | head -20 >> $A
st packages
for m in l q; do case $m in l) like=llama-3.2-1b g=llama1b;; q) like=qwen2.5-0.5b g=qwen05b;; esac
  $B/tandem synth --like $like -o /tmp/tb/$m > /dev/null 2>> $A
  $B/tandem convert /tmp/tb/$m -o $R/tmp/$m.tdm --threads 4 > /dev/null 2>> $A
  mkdir -p $L/models; PYTHONPATH=$L/gguf-py python3 $L/make_synth_gguf.py $L/models $g > /dev/null 2>> $A
done
st decode
for r in 1 2 3; do for m in l q; do for v in old new; do
  b=$B/tandem; [ $v = old ] && b=$B/tandem_old
  timeout 60 $b bench $R/tmp/$m.tdm -t 2 --tests tg128 --reps 3 --prefill cuda --decode cuda \
    --md $W/d-$m-$v-$r.md > $W/d-$m-$v-$r.json 2> $W/d-$m-$v-$r.err
  echo "-- round $r, $m, $v" >> $A; grep -E '^\| ' $W/d-$m-$v-$r.md | grep -v -- '---' | tail -1 >> $A
done; done; done
st profile
for v in old new; do
  b=$B/tandem; [ $v = old ] && b=$B/tandem_old
  TANDEM_CUDA_PROFILE=1 TANDEM_CUDA_GRAPHS=0 timeout 60 $b bench $R/tmp/l.tdm -t 2 --tests tg128 --reps 2 --prefill cuda \
    --decode cuda > /dev/null 2> $W/prof-$v.err
  echo "-- $v" >> $A; grep -E "decode steps" $W/prof-$v.err | cut -c1-220 >> $A
done
st wait
wait
tail -2 $L/b.log | cut -c1-200 >> $A
gcc -O2 -include "$R/tools/llbench_gpu.h" -I $L/include -I $L/ggml/include $L/llbench.c -o $L/llbench \
    -L $L/b/bin -lllama -lggml -lggml-base -Wl,-rpath,$L/b/bin >> $A 2>&1
for g in llama1b qwen05b; do [ -x $L/llbench ] && $L/llbench quantize $L/models/$g-bf16.gguf $L/models/$g-q4_0.gguf q4_0 16 > /dev/null 2>> $A; done
st peer
for m in l q; do case $m in l) g=llama1b;; q) g=qwen05b;; esac
  [ -x $L/llbench ] && [ $(el) -lt 520 ] || break
  timeout 75 $B/tandem bench $R/tmp/$m.tdm -t 2 --tests pp512,tg128 --reps 3 --prefill cuda --decode cuda \
    --peer llama.cpp --peer-model $L/models/$g-q4_0.gguf --peer-bin $L/llbench --md $W/p-$m.md > $W/p-$m.json 2>> $W/bench.err
  echo "-- $m: tandem int4 (packed + bf16 copy) vs llama.cpp Q4_0, both CUDA" >> $A; grep -E '^\| ' $W/p-$m.md >> $A
  st "peer $m"
done
grep -iE "error|RESULT|dropped" $W/bench.err | head -20 | cut -c1-250 >> $A
tar -C $W -czf $OUT/w.tgz .
st done
