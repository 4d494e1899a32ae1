#!/bin/sh
# session 57, call 3: the final CUDA code (call 2's "resapart" form: the indexed shape and router of call 2, the
# combine's residual fusion taken out). Its GPU tests, then tg128 of it and of it with the old indexed shape
# (TANDEM_CUDA_IX_SHAPE=0), interleaved, three rounds. Carried: tmp/cuda57c.tar.xz.
. tools/device-lib.sh
dev_init a.txt ${PK:-cuda57c}
dev_moe_shape /tmp/tb 8 &
SP=$!
st tests
dev_gpu_tests
wait $SP; st "converted"; tail -1 $W/convert.txt >> $A
bn() { env $3 timeout 60 $B/tandem bench /tmp/tb/q.tdm -t 4 --tests tg128 --reps 3 --prefill cuda --decode cuda \
    --md $W/b-$1-$2.md > $W/b-$1-$2.json 2>> $W/bench.err
  echo "$1 round $2: $(grep -E '^\| (pp|tg)' $W/b-$1-$2.md | cut -d'|' -f2,4,5 | tr '\n' ' ')" >> $A; }
for r in 1 2 3; do bn final $r X=1; bn ixold $r TANDEM_CUDA_IX_SHAPE=0; done
grep -iE "error|dropped|fail" $W/bench.err | head -10 | cut -c1-250 >> $A
st done
