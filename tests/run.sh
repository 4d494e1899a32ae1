#!/bin/sh
# tests/run.sh DIR [pattern]: run every test binary in DIR from the repository
# root, then (where DIR's build has the tandem binary) tests/test_cli.sh; print
# each one's summary, in the list's order, and the total. Exit status 1 if any failed.
# TM_TEST_JOBS tests run at once (default: the CPUs): each test's files are its own
# (build/test_NAME*), and test_engine's second run works in a scratch directory.
if [ "$1" = "--job" ]; then
  # --job RES N: job N of RES/list ("name<TAB>workdir<TAB>command"): its output to
  # RES/N.out, exit status to RES/N.rc, wall seconds to RES/N.t
  res=$2; n=$3
  line=$(sed -n "${n}p" "$res/list")
  wd=$(printf '%s' "$line" | cut -f2); cmd=$(printf '%s' "$line" | cut -f3-)
  t0=$(date +%s.%N)
  (cd "$wd" && sh -c "$cmd") > "$res/$n.out" 2>&1
  echo $? > "$res/$n.rc"
  awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f\n", b - a }' > "$res/$n.t"
  exit 0
fi
dir=${1:-build/tests}
pat=${2:-test_*}
root=$(pwd)
jobs=${TM_TEST_JOBS:-$(nproc 2>/dev/null || echo 1)}
# tests never read or write the user's caches (e.g. the router's calibration)
XDG_CACHE_HOME=$(mktemp -d "${TMPDIR:-/tmp}/tandem-test-cache.XXXXXX")
res=$(mktemp -d "${TMPDIR:-/tmp}/tandem-test-run.XXXXXX")
export XDG_CACHE_HOME
trap 'rm -rf "$XDG_CACHE_HOME" "$res"' EXIT
# the decode GEMV kernel is chosen by timing (cpu_engine.c); pin it so runs compare bit for bit
export TANDEM_GEMV=${TANDEM_GEMV:-avx512}
# the shared conformance data by an absolute path (the scratch directory below is elsewhere)
if [ -d "${TM_SHARED:-../shared}" ]; then TM_SHARED=$(cd "${TM_SHARED:-../shared}" && pwd); export TM_SHARED; fi
adir=$(cd "$dir" && pwd)
TAB=$(printf '\t')

# add NAME WORKDIR CMD: a job of the list
add() { printf '%s\t%s\t%s\n' "$1" "$2" "$3" >> "$res/list"; }

: > "$res/list"
# Longest first, so the lanes end together: test_engine, the tests measured as the next longest (sessions 61-62,
# both tiers), test_engine's second run (after those, so the two seldom run at once: beside each other under the
# sanitizers the second took 361 s rather than 207), test_cli.sh, then the rest in name order. Session 62's model
# of the schedule from session 61's times: tier 1 357 -> 322 s, tier 2 842 -> 761 s on 2 cores.
[ -x "$dir/test_engine" ] && case test_engine in $pat) add test_engine "$root" "'$adir/test_engine'" ;; esac
long="test_engine_conf test_sched test_attn test_kernels test_serve_tools test_serve_calls"
for name in $long; do
  [ -x "$dir/$name" ] || continue
  case $name in $pat) add "$name" "$root" "'$adir/$name'" ;; esac
done
# the engines again without huge pages: weights streamed from the package's mapping, and q|k|v,
# gate|up bound apart (cpu_engine.c's pack_cat needs the copy huge pages make). Under the sanitizers
# only the parts that bind every engine on every route (TM_ENGINE_BINDING). In a scratch directory
# (the demo model linked in) so it runs beside the first run without sharing its files.
if [ -x "$dir/test_engine" ] && [ "$pat" = "test_*" ]; then
  scratch="$res/engine-nohuge"
  mkdir -p "$scratch/build" && ln -s "$root/models" "$scratch/models"
  if [ -n "$TM_SANITIZER" ]; then
    add "test_engine (TANDEM_HUGEPAGES=0, binding parts)" "$scratch" \
      "TANDEM_HUGEPAGES=0 TM_ENGINE_BINDING=1 '$adir/test_engine'"
  else
    add "test_engine (TANDEM_HUGEPAGES=0)" "$scratch" "TANDEM_HUGEPAGES=0 '$adir/test_engine'"
  fi
fi
bdir=$(dirname "$adir")
if [ -x "$bdir/tandem" ] && [ -f tests/test_cli.sh ]; then
  add test_cli.sh "$root" "sh tests/test_cli.sh '$bdir'"
fi
for t in "$dir"/$pat; do
  [ -x "$t" ] || continue
  name=$(basename "$t")
  case " test_engine $long " in *" $name "*) continue ;; esac
  add "$name" "$root" "'$adir/$name'"
done

njobs=$(wc -l < "$res/list")
seq 1 "$njobs" | xargs -P "$jobs" -n 1 sh "$root/tests/run.sh" --job "$res"

# each job's "N passed, M failed" line into the totals, in the list's order
passed=0; failed=0; bins_failed=""
n=0
while IFS="$TAB" read -r name wd cmd; do
  n=$((n + 1))
  rc=$(cat "$res/$n.rc" 2>/dev/null || echo 127); secs=$(cat "$res/$n.t" 2>/dev/null || echo 0)
  line=$(grep -E ': [0-9]+ passed, [0-9]+ failed$' "$res/$n.out" 2>/dev/null | tail -n 1)
  p=$(printf '%s' "$line" | sed -E 's/.*: ([0-9]+) passed, ([0-9]+) failed$/\1/')
  f=$(printf '%s' "$line" | sed -E 's/.*: ([0-9]+) passed, ([0-9]+) failed$/\2/')
  [ -n "$p" ] || { p=0; f=1; }
  if [ "$rc" -ne 0 ] && [ "$f" = 0 ]; then f=1; fi
  passed=$((passed + p)); failed=$((failed + f))
  if [ "$rc" -ne 0 ]; then
    bins_failed="$bins_failed $name"
    tail -n 40 "$res/$n.out"
    echo "FAIL $name (exit $rc, $secs s)"
  else
    echo "ok   $name: $p checks ($secs s)"
  fi
done < "$res/list"
echo "$njobs jobs, $jobs at once"
[ -n "$bins_failed" ] && echo "failed:$bins_failed"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
