#!/bin/bash
# session 18, run 83: the gate|up GEMM's y in bf16 (gemm_bf16y). kbench ffn (the gate/up step apart in
# f32, fused, apart in bf16, in turn); the engine with TANDEM_FFN_BF16=0 against the default, pp512 with
# the paired GEMM share, interleaved; then both models beside llama.cpp.
. tools/devbench.sh; db_init 83
db_st build
db_peer_models qwen05b llama1b
db_build build/kbench build/tandem || exit 1
db_packages qwen2.5-0.5b:q llama-3.2-1b:l
db_st ffn
for s in "4864 896" "8192 2048"; do build/kbench -t 2 -s 0.3 -p 6 ffn 512 $s 2>&1 | tail -2 >> $A; done
db_st ab
for r in 1 2 3; do for m in q l; do for fb in 0 1; do
  db_left 300 || break 3
  TANDEM_FFN_BF16=$fb timeout 60 build/tandem bench /tmp/tb/$m.tdm -t 2 --tests pp512 --reps 3 --ceilings --md /tmp/g.md > /tmp/g.json 2>/dev/null
  echo "r$r fb$fb $m: $(grep -E '^\| pp512' /tmp/g.md | cut -d'|' -f4) $(grep -o 'GEMM kernels ran [0-9.]* TOP/s = \*\*[0-9]*%' /tmp/g.md)" >> $A
done; done; done
grep -E "^r[0-9] fb" $A
db_wait_models
db_st beside
i=0
for m in q:qwen05b l:llama1b; do i=$((i+1))
  db_left 500 || break
  db_beside ${m%%:*} ${m##*:} pp512,tg128 $i
  grep -h "GEMM kernels\|of the read bandwidth" $OUT/r83-${m%%:*}-$i.md | sed "s/^/# $i ${m%%:*} /" >> $A
  python3 -c "import json;d=json.load(open('$OUT/r83-${m%%:*}-$i.json'));print('# $i ${m%%:*} ceilings', json.dumps(d['ceilings']))" >> $A 2>&1
  rm -f $OUT/r83-${m%%:*}-$i.json
done
grep -h "beside\|medians" $A
db_st done
