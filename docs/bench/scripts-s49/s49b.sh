#!/bin/sh
# session 49, call 2 (a fresh machine): call 1 showed the int6 head read natively slower than widened to int8
# (124 against 88 us on Llama's head) and the new kernel's 4 loads a lane (80 registers) slower on the wide
# gate|up; so int6 is widened again, a lane loads 2 units at B <= 2, and the K split stops at 2K warps.
# Two builds of that kernel: a (as is) and b (__launch_bounds__ min 5 blocks an SM at B = 1: 48 registers,
# as session 48's kernel had, a few bytes spilled), against session 48's (old):
#   1. llama.cpp's CUDA backend built in the background (tmp/llb);
#   2. test_cuda_gemv (a and b), test_cuda, test_cuda_decode (the llama3 conformance model carried);
#   3. tools/cu_gemv_bench.c by shape, old / a / b interleaved, 2 rounds;
#   4. tandem bench tg128, old / a / b interleaved, both shapes, 2 rounds;
#   5. with the peer built: tandem bench --peer llama.cpp (pp512, tg128), build a.
# Carried: tmp/cuda49b.tar.xz (bin/, lib/, shared/conformance/models/llama3), tmp/peer.tar.xz.
R=$(pwd); OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" build /tmp/tb; A=$OUT/b.txt; L=$R/tmp/llb; P=$R/tmp/pk; W=/tmp/w
mkdir -p $W; T0=$(date +%s); st() { echo "== $1 at $(( $(date +%s) - T0 )) s" >> "$A"; }
el() { echo $(( $(date +%s) - T0 )); }
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total,driver_version --format=csv >> "$A" 2>&1
mkdir -p $L $P && tar -C $P -xJf tmp/cuda49b.tar.xz && tar -C $L -xJf tmp/peer.tar.xz
export LD_LIBRARY_PATH=$P/lib TM_SHARED=$P/shared TANDEM_GEMV=avx512 LLB_MAX_FOREIGN=1
( cd $L && cmake -S . -B b -G Ninja -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF \
    -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_COMMON=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF -DGGML_NATIVE=OFF \
    -DGGML_CCACHE=OFF > b.log 2>&1 && timeout 420 nice -n 10 ninja -C b -j 12 llama >> b.log 2>&1; echo "ninja rc $?" >> b.log ) &
B=$P/bin
st tests
for t in test_cuda_gemv test_cuda_gemv_b test_cuda test_cuda_decode; do
  ( timeout 100 $B/$t ) > $W/$t.txt 2>&1; grep -E "CHECK|passed|SKIP" $W/$t.txt | head -12 >> $A
done
st cu_gemv_bench
for r in 1 2; do for v in old a b; do
  x=$B/cu_gemv_bench; [ $v = a ] || x=$B/cu_gemv_bench_$v
  timeout 60 $x -r 15 > $W/gb-$v-$r.txt 2>&1
done; done
paste $W/gb-old-1.txt $W/gb-a-1.txt $W/gb-b-1.txt | awk -F'\t' '{printf "%-62s | %-12s | %s\n", $1, substr($2, 48), substr($3, 48)}' >> $A
st packages
for m in l q; do case $m in l) like=llama-3.2-1b g=llama1b;; q) like=qwen2.5-0.5b g=qwen05b;; esac
  $B/tandem synth --like $like -o /tmp/tb/$m > /dev/null 2>> $A
  $B/tandem convert /tmp/tb/$m -o $R/tmp/$m.tdm --threads 4 > /dev/null 2>> $A
  mkdir -p $L/models; PYTHONPATH=$L/gguf-py python3 $L/make_synth_gguf.py $L/models $g > /dev/null 2>> $A
done
st decode
for r in 1 2; do for m in l q; do for v in old a b; do
  x=$B/tandem; [ $v = a ] || x=$B/tandem_$v
  timeout 60 $x bench $R/tmp/$m.tdm -t 2 --tests tg128 --reps 3 --prefill cuda --decode cuda \
    --md $W/d-$m-$v-$r.md > $W/d-$m-$v-$r.json 2> $W/d-$m-$v-$r.err
  echo "$r $m $v $(grep -E '^\| tg128' $W/d-$m-$v-$r.md | cut -d'|' -f4)" >> $A
done; done; done
st wait
wait
tail -1 $L/b.log | cut -c1-200 >> $A
gcc -O2 -include "$R/tools/llbench_gpu.h" -I $L/include -I $L/ggml/include $L/llbench.c -o $L/llbench \
    -L $L/b/bin -lllama -lggml -lggml-base -Wl,-rpath,$L/b/bin >> $A 2>&1
for g in llama1b qwen05b; do [ -x $L/llbench ] && $L/llbench quantize $L/models/$g-bf16.gguf $L/models/$g-q4_0.gguf q4_0 16 > /dev/null 2>&1; done
st peer
for mv in l:a q:a; do m=${mv%:*} v=${mv#*:}; case $m in l) g=llama1b;; q) g=qwen05b;; esac
  [ -x $L/llbench ] && [ $(el) -lt 470 ] || break
  x=$B/tandem; [ $v = a ] || x=$B/tandem_$v
  timeout 60 $x bench $R/tmp/$m.tdm -t 2 --tests pp512,tg128 --reps 3 --prefill cuda --decode cuda \
    --peer llama.cpp --peer-model $L/models/$g-q4_0.gguf --peer-bin $L/llbench --md $W/p-$m-$v.md > $W/p-$m-$v.json 2>> $W/bench.err
  echo "-- $m, $v: tandem int4 vs llama.cpp Q4_0, both CUDA" >> $A; grep -E '^\| ' $W/p-$m-$v.md >> $A
  st "peer $m $v"
done
grep -iE "error|RESULT|dropped" $W/bench.err | head -10 | cut -c1-250 >> $A
tar -C $W -czf $OUT/w.tgz .
st done
