#!/bin/bash
# session 20, run 92: (1) test_kernels on the tiles (gemm_bf16y on glu weights); (2) kbench ffn, the four
# ways of the gate/up step (apart / fused, y f32 / bf16) on the Qwen and Llama shapes; (3) kbench-ab:
# AMX_BMAJOR (B-major products), MB=512 on the long-K shapes, an A/A control; (4) the engine, pp512 with the
# paired GEMM share, interleaved: TANDEM_Y_BF16=0 (session 19's default), the new default (q|k|v, o, down in
# bf16), TANDEM_GLU=1 (the fused gate/up, now in bf16 too).
. tools/devbench.sh; db_init 92
db_st build
db_build build/kbench build/tandem build/tests/test_kernels || exit 1
timeout 120 build/tests/test_kernels 2>&1 | grep -iE "passed|fail" | tail -3 >> $A
db_packages qwen2.5-0.5b:q llama-3.2-1b:l
db_st ffn
for s in "4864 896" "8192 2048"; do
  build/kbench -t 2 -s 0.05 -p 20 ffn 512 $s 2>&1 | grep medians | sed "s/^/ffn 512 $s: /" >> $A
done
db_st ab
DB_AB_P=40 DB_AB_S=0.05 db_ab bmajor "-DAMX_BMAJOR=1" 1 "1152 896" "896 896" "9728 896" "896 4864" "2048 2048" "2048 8192"
DB_AB_P=40 DB_AB_S=0.05 db_ab aa "-DAMX_AA_CONTROL=1" 1 "1152 896" "896 4864"
DB_AB_P=40 DB_AB_S=0.05 db_ab mb512 "-DMB=512" 1 "896 4864" "2048 8192" "16384 2048"
grep -E "^r1 |INVALID" $A
db_st engine
for r in 1 2; do for m in q l; do for cfg in Y0 def glu; do
  db_left 560 || break 3
  case $cfg in Y0) e="TANDEM_Y_BF16=0";; def) e="TANDEM_X=0";; glu) e="TANDEM_GLU=1";; esac
  env $e timeout 60 build/tandem bench /tmp/tb/$m.tdm -t 2 --tests pp512 --reps 3 --ceilings --md /tmp/g.md > /tmp/g.json 2>/dev/null
  echo "r$r $cfg $m: $(grep -E '^\| pp512' /tmp/g.md | cut -d'|' -f4) $(grep -o 'GEMM kernels ran [0-9.]* TOP/s = \*\*[0-9]*%' /tmp/g.md) $(grep -o 'range [0-9-]*%' /tmp/g.md | head -1)" >> $A
done; done; done
grep -E "^r[0-9] (Y0|def|glu)" $A
db_st done
