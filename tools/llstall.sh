#!/bin/sh
# tools/llstall.sh [PEERS_DIR]: build tools/llstall.c, llama.cpp's side of
# `tandem bench --stall N --peer llama.cpp`, against the peer that
# ../shared/peers/setup.sh installs (default $HOME/.cache/tandem-peers):
# its llama.cpp headers and node-llama-cpp's prebuilt libraries. Writes
# PEERS_DIR/llstall, beside llbench, where `tandem bench` looks for it.
# Without the peer it prints a note and exits 0: neither the build nor CI needs it.
set -e
cd "$(dirname "$0")/.."
P=${1:-${PEERS:-$HOME/.cache/tandem-peers}}
B=$P/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64
set -- "$B"/libllama.v*.so
LL=$1
set -- "$B"/libggml.v*.so
GG=$1
if [ ! -f "$P/llama.cpp/include/llama.h" ] || [ ! -f "$LL" ] || [ ! -f "$GG" ] || [ ! -f "$B/libggml-base.so" ]; then
  echo "llstall.sh: no llama.cpp peer in $P (../shared/peers/setup.sh installs it); skipped" >&2
  exit 0
fi
${CC:-gcc} -O2 -std=c11 -Wall -Wextra -Wshadow -I src -I "$P/llama.cpp/include" -I "$P/llama.cpp/ggml/include" \
  tools/llstall.c -o "$P/llstall.tmp" \
  -L"$B" -l:"$(basename "$LL")" -l:"$(basename "$GG")" -l:libggml-base.so -Wl,-rpath,"$B"
mv "$P/llstall.tmp" "$P/llstall"
echo "llstall.sh: built $P/llstall" >&2
