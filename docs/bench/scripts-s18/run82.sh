#!/bin/bash
# session 18, run 82: where the AMX GEMM's time goes outside the tile loop. kbench-ab against the
# shipped build: EPI1 = the epilogue's stores go to an L1 sink (y's DRAM stores removed), EPI2 = no
# epilogue at all; an A/A control. Then the fused gate/up GEMM (kbench ffn; the engine with TANDEM_GLU=1
# against without, pp512 t/s interleaved).
. tools/devbench.sh; db_init 82
db_st build
db_build build/kbench build/tandem || exit 1
db_packages qwen2.5-0.5b:q llama-3.2-1b:l
db_st ab
for r in 1 2; do
  for s in "9728 896" "896 4864" "16384 2048" "2048 8192" "1152 896"; do
    db_ab aa "" $r "$s"
    db_ab sink "-DAMX_EPI_MEASURE=1" $r "$s"
    db_ab noepi "-DAMX_EPI_MEASURE=2" $r "$s"
    db_left 330 || break 2
  done
done
python3 tools/abmed.py $A | tee -a $A
db_st ffn
for s in "4864 896" "8192 2048"; do build/kbench -t 2 -s 0.3 -p 6 ffn 512 $s 2>&1 | tail -2 >> $A; done
db_st glu
for r in 1 2 3; do for m in q l; do for glu in 0 1; do
  db_left 520 || break 3
  TANDEM_GLU=$glu timeout 60 build/tandem bench /tmp/tb/$m.tdm -t 2 --tests pp512 --reps 3 --ceilings --md /tmp/g.md > /tmp/g.json 2>/dev/null
  echo "r$r glu$glu $m: $(grep -E '^\| pp512' /tmp/g.md | cut -d'|' -f4) $(grep -o 'GEMM kernels ran [0-9.]* TOP/s = \*\*[0-9]*%' /tmp/g.md)" >> $A
done; done; done
grep -E "^r[0-9] glu" $A
db_st done
