#!/bin/sh
# Session 61, call 3 (PK=cuda61t: bin/tandem of 0c28ce0, the grouped decode attention with P·V on tensor cores on by
# default): the dense shapes on the GPU beside llama.cpp's CUDA build, with the grouped kernel and without it
# (TANDEM_CUDA_DEC_MMA=0). While llama.cpp builds (background, 14 jobs): the Llama-3.2-1B and Qwen2.5-0.5B shapes'
# default packages and the peer's bf16 GGUFs of them (its make_synth_gguf.py), then tg128 and e4000+96 by kernel,
# interleaved; once built: Q4_0 GGUFs and, per model, `tandem bench --peer llama.cpp` (pp512, tg128, 3 reps) with
# each kernel, two rounds where time is left. Carried: tmp/cuda61t.tar.xz, tmp/peer.tar.xz.
. tools/device-lib.sh
dev_init d.txt ${PK:-cuda61t}
L=$R/tmp/llb; mkdir -p $L $L/models && tar -C $L -xJf tmp/peer.tar.xz
( dev_peer_build $L 14; echo "peer build rc $?" >> $L/b.log ) &
BP=$!
st packages
for m in l:llama-3.2-1b:llama1b q:qwen2.5-0.5b:qwen05b; do x=${m%%:*}; y=${m#*:}
  $B/tandem synth --like ${y%:*} -o /tmp/tb/$x > /dev/null 2>> $A
  $B/tandem convert /tmp/tb/$x -o /tmp/tb/$x.tdm --threads 4 > $W/convert-$x.txt 2>&1; tail -1 $W/convert-$x.txt >> $A
  rm -rf /tmp/tb/$x
  PYTHONPATH=$L/gguf-py python3 $L/make_synth_gguf.py $L/models ${y#*:} > /dev/null 2>> $A
done
st ab
for r in 1 2; do for m in l q; do for k in 1 0; do
  TANDEM_CUDA_DEC_MMA=$k timeout 60 $B/tandem bench /tmp/tb/$m.tdm -t 4 --tests tg128,e4000+96 --reps 3 \
    --prefill cuda --decode cuda --md $W/ab-$m-$k-$r.md > /dev/null 2>> $W/bench.err
  echo "$m mma=$k round $r: $(grep -E '^\| (tg|e)' $W/ab-$m-$k-$r.md | cut -d'|' -f2,4,5 | tr '\n' ' ')" >> $A
done; done; done
st "wait peer"
wait $BP; tail -1 $L/b.log | cut -c1-200 >> $A
for g in llama1b qwen05b; do [ -x $L/llbench ] && timeout 60 $L/llbench quantize $L/models/$g-bf16.gguf \
  $L/models/$g-q4_0.gguf q4_0 16 > /dev/null 2>&1; done
st peer
for r in 1 2; do for m in l:llama1b q:qwen05b; do for k in 1 0; do x=${m%%:*}
  [ $(( $(date +%s) - T0 )) -lt 440 ] || continue
  TANDEM_CUDA_DEC_MMA=$k timeout 50 $B/tandem bench /tmp/tb/$x.tdm -t 4 --tests pp512,tg128 --reps 3 --prefill cuda \
    --decode cuda --peer llama.cpp --peer-model $L/models/${m#*:}-q4_0.gguf --peer-bin $L/llbench \
    --md $W/peer-$x-$k-$r.md > /dev/null 2>> $W/bench.err
  echo "-- $x mma=$k round $r, beside llama.cpp Q4_0 (CUDA)" >> $A; grep -E '^\| (pp|tg)' $W/peer-$x-$k-$r.md >> $A
done; done; done
cd $W && tar -czf $OUT/d.tar.gz ab-*.md peer-*.md 2>/dev/null; cd $R
grep -iE "error|fail" $W/bench.err | head -6 | cut -c1-250 >> $A
st done
