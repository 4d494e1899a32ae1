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
# Longest first, so the lanes end together: test_engine, the tests measured as the next longest, test_engine's
# second run (below), test_cli.sh, then the rest in name order. The second run goes second in tier 1 (session 64's
# CI: 258 s beside the first's 288, the next longest 136; placed after the long tests it ended tier 1 alone at
# 507 s), and after the long tests in tier 2, where beside the first it took 361 s rather than 207 (session 62)
# and is 94 s since it leaves out the slow engines (session 64).
# the engines again without huge pages: weights streamed from the package's mapping, and q|k|v,
# gate|up bound apart (cpu_engine.c's pack_cat needs the copy huge pages make). Under the sanitizers
# only the parts that bind every engine on every route (TM_ENGINE_BINDING). In a scratch directory
# (the demo model linked in) so it runs beside the first run without sharing its files.
add_nohuge() {
  [ -x "$dir/test_engine" ] && [ "$pat" = "test_*" ] || return 0
  scratch="$res/engine-nohuge"
  mkdir -p "$scratch/build" && ln -s "$root/models" "$scratch/models"
  if [ -n "$TM_SANITIZER" ]; then
    add "test_engine (TANDEM_HUGEPAGES=0, binding parts)" "$scratch" \
      "TANDEM_HUGEPAGES=0 TM_ENGINE_BINDING=1 '$adir/test_engine'"
  else
    add "test_engine (TANDEM_HUGEPAGES=0)" "$scratch" "TANDEM_HUGEPAGES=0 '$adir/test_engine'"
  fi
}
[ -x "$dir/test_engine" ] && case test_engine in $pat) add test_engine "$root" "'$adir/test_engine'" ;; esac
if [ -n "$TM_SANITIZER" ]; then
  long="test_engine_conf test_sched test_attn test_serve_tools test_serve_calls test_kernels"
else
  add_nohuge
  long="test_kernels test_engine_conf test_attn test_sched test_serve_tools test_serve_calls"
fi
for name in $long; do
  [ -x "$dir/$name" ] || continue
  case $name in $pat) add "$name" "$root" "'$adir/$name'" ;; esac
done
[ -n "$TM_SANITIZER" ] && add_nohuge
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
