#!/bin/bash
# session 16, run 72: the FFN's gate/up step apart (gate/up GEMM, then the activation and int8 pass)
# against fused (gemm_glu's epilogue, then the int8 pass), alternating in one process
# (kbench ffn, 7 rounds of 0.3 s each way), on the shipped build and with plain stores
# (-DAMX_NT_BYTES=0xffffffff); then Qwen / Llama pp512 with TANDEM_GLU=0/1 interleaved.
. tools/devbench.sh; db_init 72
db_st build
db_build build/tandem build/kbench || exit 1
db_build BUILD=/tmp/nont CFLAGS="-O2 -g -DAMX_NT_BYTES=0xffffffffu" /tmp/nont/kbench || exit 1
db_packages qwen2.5-0.5b:q llama-3.2-1b:l
db_st ffn
for r in 1 2; do
  for s in "512 4864 896" "512 8192 2048"; do
    echo "# r$r base $s: $(build/kbench -t 2 -s 0.3 -p 7 ffn $s 2>&1 | tr '\n' ' ')" >> $A
    echo "# r$r nont $s: $(/tmp/nont/kbench -t 2 -s 0.3 -p 7 ffn $s 2>&1 | tr '\n' ' ')" >> $A
  done
done
db_st pp512
pv() { local r=$1 glu=$2 m=$3
  TANDEM_GLU=$glu TANDEM_PROFILE=1 timeout 100 build/tandem bench /tmp/tb/$m.tdm -t 2 --tests pp512 --reps 2 \
    > /tmp/pv.json 2> /tmp/pv.err
  echo "r$r glu$glu $m pp512: $(grep -o '"tokens_per_s": [0-9.]*' /tmp/pv.json | grep -o '[0-9.]*$' | head -1) t/s" >> $A
  grep "tandem profile: prefill" /tmp/pv.err | sed "s/^/# r$r glu$glu $m /" >> $A; }
for r in 1 2 3 4; do
  for m in q l; do pv $r 0 $m; pv $r 1 $m; done
  db_left 500 || break
done
python3 tools/abmed.py $A | tee -a $A
grep "^# r.*ffn" $A | grep -o "^# r[0-9] [a-z]* [0-9 ]*:\|medians.*" 
db_st done
