#!/bin/sh
# tools/demo.sh PROMPT: convert the bundled model into one package and generate
# text from it with the hybrid route (prefill engine -> KV bridge -> decode engine).
set -e
cd "$(dirname "$0")/.."
T=build/tandem
M=models/tiny-classics-llama
PKG=build/tiny-classics-llama.tdm
if $T convert --help >/dev/null 2>&1; then
  # convert again when the package is older than the model or this build cannot read it
  # (a package written before a format change: tandem inspect fails on its header)
  if ! [ "$PKG" -nt "$M/model.safetensors" ] || ! $T inspect "$PKG" > /dev/null 2>&1; then
    $T convert "$M" -o "$PKG"
  fi
  MODEL=$PKG
else
  MODEL=$M
fi
echo "== tandem run $MODEL =="
$T run "$MODEL" -p "$1" -n 96 --seed 1 --route hybrid --explain
