# kbench gemv old (wt3) vs new (wt2), interleaved rounds
for r in 1 2 3; do
 for spec in "1 1 int4g64 1152 896 1" "1 1 int4g64 896 4864 1" "1 1 int4g64 1152 896 4" "1 1 int4g64 1152 896 8" "2 512 int4g64 9728 896 1" "2 512 int4g64 896 4864 1" "2 512 int6g64 151936 896 1" "2 512 int8 151936 896 1" "1 1 int6g64 4864 896 1"; do
  set -- $spec; t=$1; m=$2; shift 2
  for b in wt3 wt2; do
   g=$(/work/$b/build/kbench -t $t -s 0.4 -m $m -v avx512 gemv "$@" 2>&1 | tail -1 | grep -oE '[0-9.]+ GB/s')
   echo "r$r t$t m$m $* $b $g"
  done
 done
done
