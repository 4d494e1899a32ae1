#!/bin/sh
# tools/beside.sh OUTDIR [TANDEM]: both benchmark shapes beside llama.cpp on this machine, three rounds (round 2
# in the reverse order), pp512 and tg128, 3 reps, ceilings; /work/bench/{qwen2.5-0.5b,llama-3.2-1b}.tpk (tandem
# synth --like ..., tandem convert with the default encodings) and the peer's Q4_0 GGUFs
# (../shared/peers/setup.sh). Writes OUTDIR/rROUND-MODEL.{json,md,log}.
export LLB_BACKEND_DIR=$HOME/.cache/tandem-peers/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64
M=$HOME/.cache/tandem-peers/models; O=$1; T=${2:-build/tandem}
one() { $T bench /work/bench/$2.tpk -t 2 --tests pp512,tg128 --reps 3 --ceilings --peer llama.cpp \
        --peer-model $M/$3-q4_0.gguf --json $O/r$1-$3.json --md $O/r$1-$3.md 2>$O/r$1-$3.log; }
one 1 qwen2.5-0.5b qwen05b; one 1 llama-3.2-1b llama1b
one 2 llama-3.2-1b llama1b; one 2 qwen2.5-0.5b qwen05b
one 3 qwen2.5-0.5b qwen05b; one 3 llama-3.2-1b llama1b
