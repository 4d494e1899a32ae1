#!/bin/sh
# Session 65: the AVX2 engines beside llama.cpp on an AVX2-only host (dev: AMD EPYC, Zen 3 class, 2 cores).
# Run from the repository root after ../shared/peers/setup.sh (its ceilings.c needs AVX-512 and fails to build
# here; llbench and the GGUFs are made before it) and `tandem synth --like X` + `tandem convert` into $M.
# TD_OLD: a tandem built at d38bbc9 (before this session's AVX2 GEMV change), for the decode A/B.
P=${P:-$HOME/.cache/tandem-peers}; M=${M:-/tmp/m}; OUT=${OUT:-docs/bench/local-s65}
export LLB_BACKEND_DIR=$P/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64
for round in 1 2; do
  for s in qwen:qwen05b llama:llama1b; do
    t=${s%%:*}; g=${s##*:}
    ./build/tandem bench $M/$t.tdm -t 2 --tests pp512,tg128 --reps 3 --ceilings --peer llama.cpp \
      --peer-model $P/models/$g-q4_0.gguf --peer-bin $P/llbench > $OUT/$t-r$round.json 2> $OUT/$t-r$round.log
    [ -n "$TD_OLD" ] && $TD_OLD bench $M/$t.tdm -t 2 --tests tg128 --reps 3 > $OUT/$t-old-r$round.json 2>/dev/null
    [ -n "$TD_OLD" ] && ./build/tandem bench $M/$t.tdm -t 2 --tests tg128 --reps 3 > $OUT/$t-new-r$round.json 2>/dev/null
  done
done
