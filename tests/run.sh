#!/bin/sh
# tests/run.sh DIR [pattern]: run every test binary in DIR from the repository
# root, print each one's summary and the total. Exit status 1 if any failed.
dir=${1:-build/tests}
# tests never read or write the user's caches (e.g. the router's calibration)
XDG_CACHE_HOME=$(mktemp -d "${TMPDIR:-/tmp}/tandem-test-cache.XXXXXX")
export XDG_CACHE_HOME
trap 'rm -rf "$XDG_CACHE_HOME"' EXIT
pat=${2:-test_*}
passed=0; failed=0; bins_failed=""
for t in "$dir"/$pat; do
  [ -x "$t" ] || continue
  out=$("$t" 2>&1); rc=$?
  line=$(printf '%s\n' "$out" | grep -E ': [0-9]+ passed, [0-9]+ failed$' | tail -n 1)
  p=$(printf '%s' "$line" | sed -E 's/.*: ([0-9]+) passed, ([0-9]+) failed$/\1/')
  f=$(printf '%s' "$line" | sed -E 's/.*: ([0-9]+) passed, ([0-9]+) failed$/\2/')
  [ -n "$p" ] || { p=0; f=1; }
  if [ $rc -ne 0 ] && [ "$f" = 0 ]; then f=1; fi
  passed=$((passed + p)); failed=$((failed + f))
  if [ $rc -ne 0 ]; then
    bins_failed="$bins_failed $(basename "$t")"
    printf '%s\n' "$out" | tail -n 40
    echo "FAIL $(basename "$t") (exit $rc)"
  else
    echo "ok   $(basename "$t"): $p checks"
  fi
done
[ -n "$bins_failed" ] && echo "failed:$bins_failed"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
