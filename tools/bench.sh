#!/bin/sh
# tools/bench.sh [OUT_DIR]: the published benchmark run (docs/benchmarks.md).
# tandem and llama.cpp side by side on the same synthetic shapes, interleaved
# rep by rep, 2 threads; issue 6's acceptance run (one `tandem bench --suite
# issue6` invocation); plus this machine's ceilings. Needs the peer set up
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
# Issue 6: every acceptance figure in ONE invocation beside llama.cpp (about 40 minutes on dev):
# --suite issue6 = e448+64 and e64+448 on every route, the prompt-length sweep 16..8192 (7 reps
# at 16-64 tokens, 5 at 128-512, 3 to 4096, 2 at 8192), concurrency 1,2,4,8 clients with Poisson arrivals, and the decode stall
# (4 streams, a 448-token prompt arrives; llama.cpp's side is llstall: llama-server's schedule).
# The JSON's "acceptance" and the markdown's last section judge the four points; the SVG is the chart.
# The package is the default one (int8 prefill, int4g64 decode); the router and the stall bound
# use its calibration, so calibrate first.
sh tools/llstall.sh "$P"
M=$W/llama1b-def.tdm
G=$P/models/llama1b-q4_0.gguf
[ -f "$M" ] || $T convert "$W/llama1b" -o "$M"
$T calibrate "$M" -t 2
sh ../shared/peers/wait_idle.sh 120 2>/dev/null || true
$T bench "$M" --suite issue6 --reps 3 -t 2 \
  --peer llama.cpp --peer-model "$G" \
  --json "$OUT/local-llama1b-issue6-s5.json" --md "$OUT/local-llama1b-issue6-s5.md" --svg "$OUT/local-llama1b-issue6-s5.svg"
# Beside it (not part of the acceptance run): the stall with the decode side always lending.
sh ../shared/peers/wait_idle.sh 120 2>/dev/null || true
$T bench "$M" --tests '' --stall 4 --stall-prompt 448 --reps 3 -t 2 --max-stall off \
  --peer llama.cpp --peer-model "$G" \
  --json "$OUT/local-llama1b-stall-s5-lend.json" --md "$OUT/local-llama1b-stall-s5-lend.md" \
  --svg "$OUT/local-llama1b-stall-s5-lend.svg"
"$P/ceilings" 2 3 > "$OUT/local-ceilings.txt" 2>&1 || true
