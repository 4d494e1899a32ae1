#!/bin/bash
# session 8, last call: the final code beside llama.cpp on both shapes, then the activations'
# reciprocal (rcp14 + a Newton step) against the divide (ops_avx512.o of 4a487cd), interleaved.
R=$(pwd); OUT=${OUT:-/tmp/out}; mkdir -p $OUT; A=$OUT/all26.txt
export LD_LIBRARY_PATH=$R/.devdeps/lib TM_SHARED=$R/.devdeps
T0=$(date +%s); st() { echo "== $1 at $(( $(date +%s) - T0 )) s" | tee -a $A; }
st build
sh .devdeps/build.sh build/tandem build/libtandem.a build/tests/test_kernels > /tmp/build.log 2>&1 || { tail -40 /tmp/build.log; exit 1; }
LL="-L.devdeps/lib -lcjson -lpcre2-8 -lutf8proc -lmicrohttpd -lm -pthread"
gcc -o /tmp/td_div build/obj/src/cli/*.o .devdeps/ops_avx512_div.o build/libtandem.a $LL || echo "td_div failed" >> $A
P=.devdeps/peer; mkdir -p /tmp/gg /tmp/tb
for m in llama1b qwen05b; do
 ( PYTHONPATH=$P/gguf-py timeout 200 python3 $P/make_synth_gguf.py /tmp/gg $m > /tmp/gguf_$m.log 2>&1
   LD_LIBRARY_PATH=$P/lib LLB_BACKEND_DIR=$P/lib $P/llbench quantize /tmp/gg/$m-bf16.gguf /tmp/gg/$m-q4_0.gguf q4_0 8 >> /tmp/gguf_$m.log 2>&1 ) &
done
( build/tandem synth --like llama-3.2-1b -o /tmp/tb/llama1b > /dev/null 2>&1; build/tandem convert /tmp/tb/llama1b -o /tmp/tb/llama1b.tdm --threads 4 > /dev/null 2>> $A ) &
( build/tandem synth --like qwen2.5-0.5b -o /tmp/tb/qwen05b > /dev/null 2>> $A; build/tandem convert /tmp/tb/qwen05b -o /tmp/tb/qwen05b.tdm --threads 4 > /dev/null 2>> $A ) &
st tests
timeout 60 build/tests/test_kernels 2>&1 | tail -1 >> $A
wait
export LLB_BACKEND_DIR=$R/.devdeps/peer/lib LLB_MAX_FOREIGN=1000
for m in qwen05b llama1b; do st "bench $m"; reps=5; [ $m = llama1b ] && reps=3
LD_LIBRARY_PATH="$R/.devdeps/lib:$R/.devdeps/peer/lib" timeout 150 build/tandem bench /tmp/tb/$m.tdm -t 2 --tests pp512,tg128 --reps $reps --ceilings --peer llama.cpp --peer-model /tmp/gg/$m-q4_0.gguf --peer-bin $R/.devdeps/peer/llbench --md $OUT/xeon-s8-last-$m.md > $OUT/xeon-s8-last-$m.json 2>> $A
cat $OUT/xeon-s8-last-$m.md >> $A
done
st ab
for round in 1 2 3; do for m in qwen05b llama1b; do [ $m = llama1b ] && [ $round = 3 ] && continue; for n in div rcp; do
  b=build/tandem; [ $n = div ] && b=/tmp/td_div
  v=$(timeout 40 $b bench /tmp/tb/$m.tdm -t 2 --tests pp512 --reps 3 2>/dev/null | grep -o '"tokens_per_s": [0-9.]*' | grep -o '[0-9.]*$')
  echo "pp512 round $round $m $n $v" >> $A
done; done; done
st profile
for n in div rcp; do b=build/tandem; [ $n = div ] && b=/tmp/td_div
  TANDEM_PROFILE=1 timeout 40 $b bench /tmp/tb/qwen05b.tdm -t 2 --tests pp512 --reps 5 2>&1 >/dev/null | grep "profile: prefill" | sed "s/^/qwen05b $n: /" >> $A
done
st done
