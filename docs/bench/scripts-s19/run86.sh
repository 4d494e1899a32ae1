#!/bin/bash
# session 19 (prepared in session 18), run 86: (1) AMX_CBIAS (C starts at -128 colsum, the epilogue
# loses its subtractions), AMX_EPI_MEASURE=5 (C straight into y as int32: what moving the
# dequantization into y's readers would give the GEMM) and AMX_EPI_MEASURE=6 (the epilogue reading
# another buffer: is it the wait on the tile stores that serializes it?) and, where K takes several
# chunks, AMX_MB_LONGK=512 (one row task: the weights read once) against the shipped build
# with an A/A control, kbench-ab on Qwen's and Llama's shapes; (2) kbench ffn: the gate/up step in bf16 (now one vcvtne2ps2bf16 per row) against
# f32, to set beside run 83's 1.09x / 1.06x; (3) both models beside llama.cpp with the paired share.
# First: test_kernels and test_attn on the real tiles.
. tools/devbench.sh; db_init 86
db_st build
db_peer_models qwen05b llama1b
db_build build/kbench build/tandem build/tests/test_kernels build/tests/test_attn || exit 1
db_st tests  # the real tiles: gemm_bf16y (session 18) was tested only over emulated tiles
( timeout 120 build/tests/test_kernels 2>&1 | grep -iE "amx|passed|fail" | tail -8
  timeout 120 build/tests/test_attn 2>&1 | grep -iE "amx|passed|fail" | tail -4 ) >> $A 2>&1
db_packages qwen2.5-0.5b:q llama-3.2-1b:l
db_st ab
for r in 1 2; do
  for s in "1152 896" "9728 896" "896 4864" "16384 2048"; do
    db_ab aa "" $r "$s"
    db_ab cbias "-DAMX_CBIAS=1" $r "$s"
    db_ab raw "-DAMX_EPI_MEASURE=5" $r "$s"   # y as raw int32 tiles, no vector epilogue (results wrong)
    db_ab indep "-DAMX_EPI_MEASURE=6" $r "$s" # the epilogue not waiting on the tile stores (results wrong)
    case "$s" in *896) ;; *) db_ab mb512 "-DAMX_MB_LONGK=512" $r "$s";; esac # several K chunks: one row task
    db_left 300 || break 2
  done
done
python3 tools/abmed.py $A | tee -a $A
db_st ffn
for s in "4864 896" "8192 2048"; do build/kbench -t 2 -s 0.3 -p 6 ffn 512 $s 2>&1 | tail -2 >> $A; done
db_wait_models
db_st beside
i=0
for m in q:qwen05b l:llama1b; do i=$((i+1))
  db_left 480 || break
  db_beside ${m%%:*} ${m##*:} pp512,tg128 $i
  grep -h "GEMM kernels\|of the read bandwidth" $OUT/r86-${m%%:*}-$i.md | sed "s/^/# $i ${m%%:*} /" >> $A
  rm -f $OUT/r86-${m%%:*}-$i.json
done
grep -h "beside\|medians" $A
db_st done
