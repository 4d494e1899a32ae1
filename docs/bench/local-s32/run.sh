# session 32: beside llama.cpp, three rounds (round 2 in the reverse order), default packages
# (tandem synth --like qwen2.5-0.5b|llama-3.2-1b, tandem convert with the default encodings)
export LLB_BACKEND_DIR=$HOME/.cache/tandem-peers/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64
M=$HOME/.cache/tandem-peers/models; T=/work/main/build/tandem; O=/work/main/docs/bench/local-s32
one() { $T bench /work/bench/$2.tpk -t 2 --tests pp512,tg128 --reps 3 --ceilings --peer llama.cpp \
        --peer-model $M/$3-q4_0.gguf --json $O/r$1-$3.json --md $O/r$1-$3.md 2>$O/r$1-$3.log; }
one 1 qwen2.5-0.5b qwen05b; one 1 llama-3.2-1b llama1b
one 2 llama-3.2-1b llama1b; one 2 qwen2.5-0.5b qwen05b
one 3 qwen2.5-0.5b qwen05b; one 3 llama-3.2-1b llama1b
