#!/bin/sh
# Session 61, call 4 (PK=cuda61c): the grouped decode attention's segments for the dense GQA shapes, three builds:
# bin/tandem-old (0c28ce0: at least 64 keys a segment, at most MERGE_W / 16 = 32 segments a row), bin/tandem-A (the
# cap by the tile's own head count: MERGE_W / min(G, 16), Qwen-0.5B's 7 heads a tile 73), bin/tandem (B: that and at
# least 16 keys a segment for this kernel, -DMT_SEG_MIN=16; its test_cuda_decode first). tg128 and e4000+96 on the
# Llama-3.2-1B and Qwen2.5-0.5B shapes, interleaved, two rounds. Carried: tmp/cuda61c.tar.xz.
# NOT YET RUN: session 61's device time was spent (the call was refused for lack of it). The change is
# docs/bench/scripts-s61/dec-mma-segs.diff (A as it is; B also built with CU_ARCH="... -DMT_SEG_MIN=16" after touching
# cu_dec.cu). To rebuild the package: build-cu at 0c28ce0's code -> tandem-old; the diff applied -> tandem-A; with
# -DMT_SEG_MIN=16 -> tandem and test_cuda_decode; `BINS="build-cu/tandem build-cu/tests/test_cuda_decode" MODELS=" "
# OLD=<tandem-old> sh /work/mkpk.sh cuda61c`, then tandem-A added to its bin/ and the tarball re-made.
. tools/device-lib.sh
dev_init d.txt ${PK:-cuda61c}
st tests
dev_gpu_tests # the package holds test_cuda_decode only: the others are not there to run
st packages
for m in l:llama-3.2-1b q:qwen2.5-0.5b; do x=${m%%:*}
  $B/tandem synth --like ${m#*:} -o /tmp/tb/$x > /dev/null 2>> $A
  $B/tandem convert /tmp/tb/$x -o /tmp/tb/$x.tdm --threads 8 > $W/convert-$x.txt 2>&1; tail -1 $W/convert-$x.txt >> $A
  rm -rf /tmp/tb/$x
done
st ab
for r in 1 2; do for m in l q; do for v in old A B; do x=$B/tandem-$v; [ $v = B ] && x=$B/tandem
  timeout 40 $x bench /tmp/tb/$m.tdm -t 4 --tests tg128,e4000+96 --reps 3 --prefill cuda --decode cuda \
    --md $W/ab-$m-$v-$r.md > /dev/null 2>> $W/bench.err
  echo "$m $v round $r: $(grep -E '^\| (tg|e)' $W/ab-$m-$v-$r.md | cut -d'|' -f2,4,5 | tr '\n' ' ')" >> $A
done; done; done
cd $W && tar -czf $OUT/d.tar.gz ab-*.md dec.txt 2>/dev/null; cd $R
grep -iE "error|fail" $W/bench.err | head -6 | cut -c1-250 >> $A
st done
