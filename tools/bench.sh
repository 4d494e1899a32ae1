#!/bin/sh
# tools/bench.sh [OUT_DIR]: the published benchmark run (docs/benchmarks.md).
# tandem and llama.cpp side by side on the same synthetic shapes, interleaved
# rep by rep, 2 threads; plus this machine's ceilings. Needs the peer set up
# (../shared/peers/setup.sh). Large files go to /tmp/tandem-bench.
set -e
cd "$(dirname "$0")/.."
OUT=${1:-docs/bench}
W=/tmp/tandem-bench
P=${PEERS:-$HOME/.cache/tandem-peers}
T=build/tandem
export LLB_BACKEND_DIR=${LLB_BACKEND_DIR:-$P/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64}
mkdir -p "$W" "$OUT"
for m in llama-3.2-1b:llama1b qwen2.5-0.5b:qwen05b; do
  like=${m%%:*}; g=${m##*:}
  [ -d "$W/$g" ] || $T synth --like "$like" -o "$W/$g"
  for enc in int4g64:q4_0 int8:q8_0; do
    e=${enc%%:*}; q=${enc##*:}
    [ -f "$W/$g-$e.tdm" ] || $T convert "$W/$g" -o "$W/$g-$e.tdm" --decode-enc "$e"
    sh ../shared/peers/wait_idle.sh 120 2>/dev/null || true
    $T bench "$W/$g-$e.tdm" --tests pp512,tg128,e448+64,e64+448 --reps 3 -t 2 \
      --peer llama.cpp --peer-model "$P/models/$g-$q.gguf" \
      --json "$OUT/local-$g-$e.json" --md "$OUT/local-$g-$e.md" --svg "$OUT/local-$g-$e.svg"
  done
done
# Decode stall (issue 6): 4 streams running, a 448-token prompt arrives; tandem
# with and without core lending, each interleaved with llama.cpp's llstall
# (llama-server's schedule: one context, 5 sequences, n_batch 2048, n_ubatch 512).
sh tools/llstall.sh "$P"
M=$W/llama1b-int4g64.tdm
for v in lend: nolend:--no-lend; do
  sh ../shared/peers/wait_idle.sh 120 2>/dev/null || true
  $T bench "$M" --tests '' --stall 4 --stall-prompt 448 --reps 3 -t 2 ${v#*:} \
    --peer llama.cpp --peer-model "$P/models/llama1b-q4_0.gguf" \
    --json "$OUT/local-llama1b-stall-peer-${v%%:*}.json" --md "$OUT/local-llama1b-stall-peer-${v%%:*}.md"
done
"$P/ceilings" 2 3 > "$OUT/local-ceilings.txt" 2>&1 || true
