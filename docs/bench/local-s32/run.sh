# session 32: beside llama.cpp, three rounds (round 2 in the reverse order), default packages
sh tools/beside.sh docs/bench/local-s32 /work/main/build/tandem
