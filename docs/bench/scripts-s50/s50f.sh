#!/bin/sh
# session 50, call 3b, run inline on call 3a's warm machine (tmp/cuda50c.tar.xz already unpacked in tmp/pk,
# tmp/q.tdm converted): the Llama-3.2-1B shape converted, then tg128 for each model, builds in the order
# new, old (session 49, 843ed12), new with TANDEM_CUDA_PINNED=0, new.
P=$(pwd)/tmp/pk; B=$P/bin; export LD_LIBRARY_PATH=$P/lib TANDEM_GEMV=avx512
$B/tandem synth --like llama-3.2-1b -o /tmp/tb/l > /dev/null && $B/tandem convert /tmp/tb/l -o /tmp/tb/l.tdm --threads 16 > /dev/null
for m in l q; do f=/tmp/tb/l.tdm; [ $m = q ] && f=tmp/q.tdm
  for v in new old nopin new; do x=$B/tandem; e=""
    case $v in old) x=$B/tandem_old;; nopin) e="TANDEM_CUDA_PINNED=0";; esac
    echo "$m $v $(env $e timeout 40 $x bench $f -t 2 --tests tg128 --reps 3 --prefill cuda --decode cuda --md /tmp/x.md > /dev/null 2>&1
                  grep -E '^\| tg128' /tmp/x.md | cut -d'|' -f4)"
  done
done
