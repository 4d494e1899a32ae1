#!/bin/sh
# tests/run.sh DIR [pattern]: run every test binary in DIR from the repository
# root, then (where DIR's build has the tandem binary) tests/test_cli.sh; print
# each one's summary and the total. Exit status 1 if any failed.
dir=${1:-build/tests}
pat=${2:-test_*}
# tests never read or write the user's caches (e.g. the router's calibration)
XDG_CACHE_HOME=$(mktemp -d "${TMPDIR:-/tmp}/tandem-test-cache.XXXXXX")
export XDG_CACHE_HOME
trap 'rm -rf "$XDG_CACHE_HOME"' EXIT
# the decode GEMV kernel is chosen by timing (cpu_engine.c); pin it so runs compare bit for bit
export TANDEM_GEMV=${TANDEM_GEMV:-avx512}
passed=0; failed=0; bins_failed=""

# run_one NAME CMD...: run a test, add its "N passed, M failed" line to the totals
run_one() {
  name=$1; shift
  t0=$(date +%s.%N)
  out=$("$@" 2>&1); rc=$?
  secs=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
  line=$(printf '%s\n' "$out" | grep -E ': [0-9]+ passed, [0-9]+ failed$' | tail -n 1)
  p=$(printf '%s' "$line" | sed -E 's/.*: ([0-9]+) passed, ([0-9]+) failed$/\1/')
  f=$(printf '%s' "$line" | sed -E 's/.*: ([0-9]+) passed, ([0-9]+) failed$/\2/')
  [ -n "$p" ] || { p=0; f=1; }
  if [ $rc -ne 0 ] && [ "$f" = 0 ]; then f=1; fi
  passed=$((passed + p)); failed=$((failed + f))
  if [ $rc -ne 0 ]; then
    bins_failed="$bins_failed $name"
    printf '%s\n' "$out" | tail -n 40
    echo "FAIL $name (exit $rc, $secs s)"
  else
    echo "ok   $name: $p checks ($secs s)"
  fi
}

for t in "$dir"/$pat; do
  [ -x "$t" ] || continue
  run_one "$(basename "$t")" "$t"
done
# the engines again without huge pages: weights streamed from the package's mapping, and q|k|v,
# gate|up bound apart (cpu_engine.c's pack_cat needs the copy huge pages make). Under the sanitizers
# (6 minutes a whole run there) only the parts that bind every engine on every route (TM_ENGINE_BINDING)
if [ -x "$dir/test_engine" ] && [ "$pat" = "test_*" ]; then
  if [ -n "$TM_SANITIZER" ]; then
    run_one "test_engine (TANDEM_HUGEPAGES=0, binding parts)" env TANDEM_HUGEPAGES=0 TM_ENGINE_BINDING=1 "$dir/test_engine"
  else
    run_one "test_engine (TANDEM_HUGEPAGES=0)" env TANDEM_HUGEPAGES=0 "$dir/test_engine"
  fi
fi
bdir=$(dirname "$dir")
if [ -x "$bdir/tandem" ] && [ -f tests/test_cli.sh ]; then
  run_one test_cli.sh sh tests/test_cli.sh "$bdir"
fi
[ -n "$bins_failed" ] && echo "failed:$bins_failed"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
