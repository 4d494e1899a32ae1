#!/bin/sh
# tools/deps.sh: install the Debian packages tandem builds against, if missing.
# Run as root to install; otherwise it only reports what is missing.
pkgs="build-essential libcjson-dev libpcre2-dev libutf8proc-dev libmicrohttpd-dev"
missing=""
for p in $pkgs; do
  dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" = 0 ]; then
  echo "installing:$missing"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -q $missing >/dev/null 2>&1 || { apt-get update -q >/dev/null && apt-get install -y -q $missing; } || exit 1
else
  echo "missing Debian packages:$missing (run 'make deps' as root, or: sudo apt-get install$missing)" >&2
  exit 1
fi
