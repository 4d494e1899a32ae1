#!/bin/bash
# session 16, run 71: the FFN's gate/up GEMM with the activation in its epilogue (TANDEM_GLU=1) against
# the separate pass (default), each with the shipped non-temporal output (f32 outputs of 8 MB and
# more) and with plain stores (-DAMX_NT_BYTES=0xffffffff: the output stays in L3 for the next
# pass); pp512 interleaved on Qwen and Llama, TANDEM_PROFILE=1's rates by shape.
. tools/devbench.sh; db_init 71
db_st build
db_build build/tandem || exit 1
db_build BUILD=/tmp/nont CFLAGS="-O2 -g -DAMX_NT_BYTES=0xffffffffu" /tmp/nont/tandem || exit 1
db_packages qwen2.5-0.5b:q llama-3.2-1b:l
db_st pp512
pv() { local r=$1 v=$2 m=$3 bin=$R/build glu=0
  case $v in *nont*) bin=/tmp/nont;; esac; case $v in glu*) glu=1;; esac
  TANDEM_GLU=$glu TANDEM_PROFILE=1 timeout 100 $bin/tandem bench /tmp/tb/$m.tdm -t 2 --tests pp512 --reps 2 \
    > /tmp/pv.json 2> /tmp/pv.err
  echo "r$r $v $m pp512: $(grep -o '"tokens_per_s": [0-9.]*' /tmp/pv.json | grep -o '[0-9.]*$' | tr '\n' ' ') t/s" >> $A
  grep "tandem profile: prefill" /tmp/pv.err | sed "s/^/# r$r $v $m /" >> $A; }
for r in 1 2 3; do
  for m in q l; do for v in base glu nont glu-nont; do pv $r $v $m; done; done
  db_left 540 || break
done
python3 tools/abmed.py $A | tee -a $A
db_st done
