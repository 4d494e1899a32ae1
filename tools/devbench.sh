# tools/devbench.sh: the pieces every device benchmark script repeated (sessions 11-14),
# sourced by a script run from the repository root with .devdeps carried
# (docs/benchmarks.md "To repeat an h200-host run"):
#
#   . tools/devbench.sh; db_init 64                 # $OUT/all64.txt, the CPU's model line
#   db_peer_models qwen05b llama1b                  # llama.cpp Q4_0 GGUFs into /tmp/gg (background)
#   db_build build/tandem build/kbench              # the working tree's targets (.devdeps/build.sh)
#   db_packages qwen2.5-0.5b:q llama-3.2-1b:l       # /tmp/tb/q.tdm, /tmp/tb/l.tdm (default encodings)
#   db_wait_models
#   db_beside q qwen05b pp512,tg128 1               # tandem bench beside llama.cpp: r64-q-1.md|json
#   db_left 400 && db_beside l llama1b pp512,tg128 1
#   echo "r1 NEW int4g64 1152 896 1: $(db_kbench build/kbench -t 2 -v avx512 gemv int4g64 1152 896 1)" >> $A
#   db_pairs /tmp/bnew build 3 560 q l              # engine pp512, two builds interleaved, 3 rounds
#   db_ab NAME "-DAMX_PG=8" 1 "896 4864" "2048 2048" # kbench-ab: that build option against the shipped
#                                                   # GEMM in one process, a line per shape (int8, M 512)
#   python3 tools/abmed.py $A                       # medians of interleaved rounds
#
# Sets R (repository root), OUT, A (the run's text log), T0, and LD_LIBRARY_PATH for the carried
# libraries. Every function appends what it saw to $A; failures are logged, not fatal, except
# a failed build (db_build returns 1).

db_init() { # RUN: the run's number, naming its outputs
    R=$(pwd); OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"; RUN=$1; A=$OUT/all$RUN.txt
    export LD_LIBRARY_PATH=$R/.devdeps/lib
    T0=$(date +%s)
    lscpu | grep -iE "model name|MHz" | cut -c1-120 >> "$A"
}

db_st() { echo "== $1 at $(( $(date +%s) - T0 )) s" | tee -a "$A"; }

db_left() { [ $(( $(date +%s) - T0 )) -lt "$1" ]; } # true while fewer than $1 seconds have passed

db_peer_models() { # NAMES (make_synth_gguf.py's: qwen05b, llama1b): written and quantized in the background
    local P=$R/.devdeps/peer; mkdir -p /tmp/gg
    ( for m in "$@"; do
        PYTHONPATH=$P/gguf-py timeout 200 python3 "$P/make_synth_gguf.py" /tmp/gg "$m" > "/tmp/gguf-$m.log" 2>&1
        LD_LIBRARY_PATH=$P/lib LLB_BACKEND_DIR=$P/lib "$P/llbench" quantize "/tmp/gg/$m-bf16.gguf" \
            "/tmp/gg/$m-q4_0.gguf" q4_0 6 >> "/tmp/gguf-$m.log" 2>&1
        rm -f "/tmp/gg/$m-bf16.gguf"
      done ) &
    DB_GG=$!
}

db_wait_models() { [ -n "$DB_GG" ] && wait "$DB_GG"; ls -la /tmp/gg >> "$A"; }

db_build() { # TARGETS [BUILD=dir CFLAGS=...]: make with the carried headers and libraries
    sh "$R/.devdeps/build.sh" "$@" > /tmp/build.log 2>&1 || { tail -40 /tmp/build.log | tee -a "$A"; return 1; }
}

db_packages() { # LIKE:NAME ...: tandem synth --like LIKE, converted to /tmp/tb/NAME.tdm by build/tandem
    mkdir -p /tmp/tb
    for m in "$@"; do
        "$R/build/tandem" synth --like "${m%%:*}" -o "/tmp/tb/${m##*:}" > /dev/null 2>> "$A"
        "$R/build/tandem" convert "/tmp/tb/${m##*:}" -o "/tmp/tb/${m##*:}.tdm" --threads 8 > /dev/null 2>> "$A"
        rm -rf "/tmp/tb/${m##*:}"
    done
}

db_beside() { # PKG GGUF TESTS TAG [TANDEM_BIN_DIR]: tandem bench beside llama.cpp, 3 reps, with the ceilings
    local bin=${5:-$R/build}
    LD_LIBRARY_PATH="$R/.devdeps/lib:$R/.devdeps/peer/lib" LLB_BACKEND_DIR=$R/.devdeps/peer/lib LLB_MAX_FOREIGN=1000 \
        timeout 150 "$bin/tandem" bench "/tmp/tb/$1.tdm" -t 2 --tests "$3" --reps 3 --ceilings --peer llama.cpp \
        --peer-model "/tmp/gg/$2-q4_0.gguf" --peer-bin "$R/.devdeps/peer/llbench" --md "$OUT/r$RUN-$1-$4.md" \
        > "$OUT/r$RUN-$1-$4.json" 2>> "$A"
    echo "beside $1 $4: $(grep -E '^\| (pp|tg)[0-9]' "$OUT/r$RUN-$1-$4.md" | tr '\n' ' ')" >> "$A"
}

db_pairs() { # NEW_DIR OLD_DIR ROUNDS UNTIL MODEL...: the engine's pp512 (tandem bench, 3 reps, --ceilings)
             # with NEW_DIR/tandem and OLD_DIR/tandem in turn, ROUNDS rounds over /tmp/tb/MODEL.tdm, while
             # fewer than UNTIL seconds have passed; logs "eng ROUND MODEL new|old: <each rep's rate and
             # GEMM share>"
    local new=$1 old=$2 rounds=$3 until=$4 i m b bin; shift 4
    for i in $(seq "$rounds"); do
        for m in "$@"; do
            for b in new old; do
                db_left "$until" || return 0
                bin=$new; [ $b = old ] && bin=$old
                "$bin/tandem" bench "/tmp/tb/$m.tdm" -t 2 --tests pp512 --reps 3 --ceilings > /tmp/e.json 2> /tmp/e.txt
                echo "eng $i $m $b: $(grep -oE 'pp512 [a-z]+: tandem [0-9.]+ \(GEMMs [0-9]+ GOP/s, [0-9.]+%' /tmp/e.txt | tr '\n' ' ')" >> "$A"
            done
        done
    done
}

db_kbench() { # KBENCH ARGS...: the first GB/s or GFLOP/s kbench prints (for abmed.py lines)
    "$@" 2>&1 | grep -oE '[0-9.]+ (GB/s|GFLOP/s)' | head -1
}

db_ab() { # NAME "AMX_ALT flags" ROUND "N K" ...: kbench-ab -a 1 (DB_AB_P rounds, default 8, of DB_AB_S seconds
          # a build, default 0.2; weights over 128 MB, made once a shape; DB_AB_Y=1: both builds store y in bf16):
          # each round the tile peak, both GEMM builds in alternating order, the peak; logs "rROUND NAME 512 N K:
          # RATIO x" (the median over pairs of rounds of the alternative / shipped ratio, one round each build
          # first) and flags an alternative build that fails validation
    local name=$1 flags=$2 r=$3; shift 3
    [ -x "/tmp/kab-$name" ] || { db_build kbench-ab "AMX_ALT=$flags" && cp "$R/build/kbench-ab" "/tmp/kab-$name"; } || return 1
    for s in "$@"; do
        local o; o=$("/tmp/kab-$name" -a 1 ${DB_AB_Y:+-Y "$DB_AB_Y"} -t 2 -s "${DB_AB_S:-0.2}" -p "${DB_AB_P:-8}" -m 128 -v amx gemm int8 512 $s 2>&1)
        echo "$o" | grep -q INVALID && echo "INVALID $name $s" >> "$A"
        echo "r$r $name 512 $s: $(echo "$o" | grep -oE 'build first\): median [0-9.]+x' | grep -oE '[0-9.]+' | head -1) x" >> "$A"
        echo "# r$r $name 512 $s: $(echo "$o" | grep -oE 'by who ran first.*'); shipped: $(echo "$o" | grep -oE 'median [0-9.]+% of the peak beside it' | head -1); alternative: $(echo "$o" | grep -oE 'alternative build: median [0-9.]+%' | head -1)" >> "$A"
    done
}
