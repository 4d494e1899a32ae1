#!/bin/sh
# session 46, call 2: the bias fix and the bf16 copy beside packed weights: CUDA tests, ST refs, decode bench
R=$(pwd); OUT=${OUT:-/tmp/out}; W=/tmp/w; mkdir -p "$OUT" build $W; A=$OUT/cuda.txt
T0=$(date +%s); st() { echo "== $1 at $(( $(date +%s) - T0 )) s" >> "$A"; }
P=/tmp/pk; mkdir -p $P && tar -C $P -xJf tmp/cuda.tar.xz
export LD_LIBRARY_PATH=$P/lib TM_SHARED=$P/shared TANDEM_GEMV=avx512
B=$P/bin
nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv >> "$A" 2>&1
( OMP_NUM_THREADS=2 timeout 300 python3 tools/gen_embed_refs.py $P/shared/conformance/models $OUT/embed_refs.json > $W/st.txt 2>&1
  timeout 100 python3 tools/gen_template_refs.py tests/data/chat_templates > $W/tpl1.txt 2>&1
  timeout 100 python3 tools/gen_template_refs.py tests/data/templates > $W/tpl2.txt 2>&1
  tar -czf $OUT/tpl.tgz tests/data/chat_templates/*.json tests/data/templates/*.json ) &
STP=$!
st tests
( timeout 60 $B/test_cuda_gemv ) > $W/t_gemv.txt 2>&1; tail -1 $W/t_gemv.txt >> $A
( timeout 200 $B/test_cuda_decode ) > $W/t_dec.txt 2>&1; grep -E "packed|passed" $W/t_dec.txt | cut -c1-250 >> $A
( timeout 120 $B/test_cuda ) > $W/t_cuda.txt 2>&1; tail -1 $W/t_cuda.txt >> $A
( TM_CONF_ENGINE=cuda timeout 240 $B/test_engine_conf ) > $W/t_conf.txt 2>&1; grep -E "all 55|passed|^cuda|^cpu-avx512" $W/t_conf.txt | grep -v " fixture: " | cut -c1-250 >> $A
grep -h "CHECK failed" $W/t_*.txt | head -20 | cut -c1-300 >> $A
st packages
mkdir -p /tmp/tb
for m in l q; do
  case $m in l) like=llama-3.2-1b;; q) like=qwen2.5-0.5b;; esac
  $B/tandem synth --like $like -o /tmp/tb/$m > /dev/null 2>> $A
  $B/tandem convert /tmp/tb/$m -o /tmp/tb/$m.tdm --threads 8 > /dev/null 2>> $A
done
wait $STP; grep -E "^[a-z0-9_]+: " $W/st.txt | cut -c1-200 >> $A; grep -c "tools_text', 'ok'" $W/tpl1.txt $W/tpl2.txt >> $A
st bench
for m in l q; do for v in dual:1:1 bf16:0:0 packed:1:0; do
  IFS=: read tag pk cp <<X
$v
X
  [ $tag = packed ] && [ $m = l ] && continue
  TANDEM_CUDA_PACKED=$pk TANDEM_CUDA_BF16_COPY=$cp TANDEM_CUDA_PROFILE=1 timeout 60 $B/tandem bench /tmp/tb/$m.tdm -t 2 \
    --tests tg128 --reps 3 --prefill cuda --decode cuda --concurrency 1,16,64 --conc 448+64 --md $W/b-$m-$tag.md \
    > $W/b-$m-$tag.json 2>> $W/bench-$m-$tag.err
  echo "-- $m $tag" >> $A; grep -E '^\| ' $W/b-$m-$tag.md >> $A; grep "decode steps" $W/bench-$m-$tag.err | cut -c1-200 >> $A
done; done
tar -C $W -czf $OUT/w.tgz .
st done
