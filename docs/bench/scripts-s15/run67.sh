#!/bin/bash
# session 15, run 67: sessions and the bench's ceilings on tm_cpu_pick's CPUs (CPU 0 left out where
# others suffice; with -t 2 on 16 vCPUs: 1, 2) and llama.cpp pinned to the same ones, against the
# same binary under taskset -c 0,1 (both sides on CPUs 0, 1), interleaved; Qwen, then Llama.
. tools/devbench.sh; db_init 67
db_st build
db_peer_models qwen05b llama1b
db_build build/tandem || exit 1
db_packages qwen2.5-0.5b:q llama-3.2-1b:l
db_wait_models
db_st bench
cpu01() { taskset -c 0,1 "$@"; }
beside01() { # like db_beside, under taskset -c 0,1
  LD_LIBRARY_PATH="$R/.devdeps/lib:$R/.devdeps/peer/lib" LLB_BACKEND_DIR=$R/.devdeps/peer/lib LLB_MAX_FOREIGN=1000 \
    timeout 150 taskset -c 0,1 "$R/build/tandem" bench "/tmp/tb/$1.tdm" -t 2 --tests "$3" --reps 3 --ceilings --peer llama.cpp \
    --peer-model "/tmp/gg/$2-q4_0.gguf" --peer-bin "$R/.devdeps/peer/llbench" --md "$OUT/r$RUN-$1-$4.md" \
    > "$OUT/r$RUN-$1-$4.json" 2>> "$A"
  echo "beside $1 $4: $(grep -E '^\| (pp|tg)[0-9]' "$OUT/r$RUN-$1-$4.md" | tr '\n' ' ')" >> "$A"; }
db_beside q qwen05b pp512,tg128 pick1
beside01 q qwen05b pp512,tg128 cpu01-1
db_left 330 && db_beside q qwen05b pp512,tg128 pick2
db_left 390 && beside01 q qwen05b pp512,tg128 cpu01-2
db_left 440 && db_beside l llama1b pp512,tg128 pick1
grep -h "ceilings" $A | head -20
db_st done
