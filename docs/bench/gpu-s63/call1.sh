#!/bin/sh
# Session 63, call 1 (kind nvidia-h100-x1 or nvidia-h200, carrying tmp/cuda63.tar.xz from /work/mkpk.sh with all seven
# conformance models, and tmp/peer.tar.xz): the GPU tests on the split engine (cu_step.c) with test_cuda_decode's
# steps counted by kernel; then llama.cpp's CUDA build beside tandem's CUDA engine, pp512 / tg128 and a long context (e2000+64 on
# Llama, e5000+64 on Qwen: past the grouped decode attention's span), three rounds on the Llama-3.2-1B and Qwen2.5-0.5B
# shapes (tandem's default packages: int4 g64 decode; Q4_0 for the peer). NOPEER=1: the tests only.
. tools/device-lib.sh
dev_init d.txt cuda63
L=$R/tmp/llb; mkdir -p $L && tar -C $L -xJf tmp/peer.tar.xz
[ -n "$NOPEER" ] || { ( dev_peer_build $L 12; echo "peer build rc $?" >> $L/b.log ) & }
BP=$!
st tests
TM_CONF_MODELS=llama3,qwen3_moe,qwen3,qwen2,gemma2,mistral,phi3 dev_gpu_tests
cat $W/dec.txt > $OUT/dec.txt
grep -E "by the attention|^--" $W/dec.txt >> $A
[ -z "$NOPEER" ] || { st done; exit 0; } # NOPEER=1: the tests only (a short device budget)
st packages
dev_shapes 4 l:llama-3.2-1b q:qwen2.5-0.5b
for g in llama1b qwen05b; do PYTHONPATH=$L/gguf-py python3 $L/make_synth_gguf.py /tmp/tb $g > $W/gguf-$g.txt 2>&1; done
st "wait peer build"
wait $BP; tail -1 $L/b.log | cut -c1-200 >> $A
for g in llama1b qwen05b; do timeout 60 $L/llbench quantize /tmp/tb/$g-bf16.gguf /tmp/tb/$g-q4_0.gguf q4_0 16 > $W/quant.txt 2>&1; done
ls -la /tmp/tb >> $A
for r in 1 2 3; do
  for m in l:llama1b:e2000+64 q:qwen05b:e5000+64; do
    x=${m%%:*}; y=${m#*:}; g=${y%%:*}; e=${y#*:}
    st "round $r $x"
    timeout 90 $B/tandem bench /tmp/tb/$x.tdm -t 4 --tests pp512,tg128,$e --reps 3 --prefill cuda --decode cuda \
      --peer llama.cpp --peer-model /tmp/tb/$g-q4_0.gguf --peer-bin $L/llbench --md $W/$x-$r.md > $W/$x-$r.json 2>> $W/bench.err
    grep -E '^\| ' $W/$x-$r.md >> $A
    grep -h tpot_p50 $W/$x-$r.json | head -4 >> $A
  done
done
grep -iE "error|fail" $W/bench.err | head -6 | cut -c1-250 >> $A
tar -C $W -czf $OUT/rounds.tgz $(cd $W && ls *.md *.json)
st done
