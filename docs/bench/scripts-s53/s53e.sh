#!/bin/sh
# session 53, call 5: prompt lookup on the CUDA engine in both roles: test_lookup (its session checks on
# the CPU engines, then on --prefill cuda --decode cuda), then tandem run on the Llama-1B shape with the
# GPU in both roles, --lookup 0 and 7, two rounds (prompt.txt: a 600-byte passage of the demo's held-out
# text given twice). Carried: $TAR (bin/, lib/, shared/, prompt.txt): tmp/cuda53e.tar.xz in call 5; call 6 ran
# TAR=tmp/cuda53f.tar.xz, the build with tm_kv_seq.rewinds (call 5 found the CUDA mirror trusted past a
# rewind) and the scheduler's pay-off rule.
R=$(pwd); OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" build /tmp/tb; A=$OUT/a.txt; P=$R/tmp/pk
mkdir -p $P; T0=$(date +%s); st() { echo "== $1 at $(( $(date +%s) - T0 )) s" >> "$A"; }
nvidia-smi --query-gpu=name,driver_version --format=csv >> "$A" 2>&1
tar -C $P -xJf ${TAR:-tmp/cuda53e.tar.xz}
export LD_LIBRARY_PATH=$P/lib TM_SHARED=$P/shared TANDEM_GEMV=avx512
B=$P/bin
st tests
( timeout 150 $B/test_lookup ) 2>&1 | grep -vE "^ok " | head -30 >> $A
st package
$B/tandem synth --like llama-3.2-1b -o /tmp/tb/l > /dev/null 2>> $A
$B/tandem convert /tmp/tb/l -o /tmp/tb/l.tdm --threads 8 > /dev/null 2>> $A
st run
for r in 1 2; do for L in 0 7; do
  timeout 60 $B/tandem run /tmp/tb/l.tdm -f $P/prompt.txt -n 128 --temp 0 --ignore-eos --lookup $L \
    --prefill cuda --decode cuda -t 4 > $OUT/o$L.txt 2> $OUT/e$L-$r.txt
  echo "$r L=$L $(grep -E 'route|lookup' $OUT/e$L-$r.txt | sed 's/.*generation/generation/' | tr '\n' ' ')" >> $A
done; done
cmp $OUT/o0.txt $OUT/o7.txt >> $A 2>&1 && echo "texts the same" >> $A
st done
