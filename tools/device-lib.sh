# tools/device-lib.sh: the pieces the device scripts share (sourced, POSIX sh), run from the repository root on
# the lent GPU machine:
#   dev_init LOG PKG       $OUT made, A := $OUT/LOG (the call's log), st NAME appends "== NAME at T s", the GPU's
#                          name and memory logged, tmp/PKG.tar.xz (bin/, lib/, shared/) unpacked into P, B := $P/bin,
#                          the environment the binaries need exported
#   dev_peer_build DIR J   llama.cpp's CUDA build (sm_90) in DIR (tmp/peer.tar.xz unpacked there), J jobs, then
#                          DIR/llbench (tools/llbench_gpu.h: every layer on the GPU); its log DIR/b.log
#   dev_moe_shape DIR [N]  the Qwen3-30B-A3B shape cut to 8 layers (tandem synth) and its default package DIR/q.tdm
#                          (converted by N threads, default 8; its log $W/convert.txt)
#   dev_shapes N X:LIKE[:LAYERS] ...  /tmp/tb/X.tdm: `tandem synth --like LIKE` (cut to LAYERS), the default conversion
#                          by N threads (logs $W/convert-X.txt)
#   dev_dec_shapes         the decode measurements' packages: /tmp/tb/d.tdm (DeepSeek-V2-Lite cut to 4 layers) and
#                          /tmp/tb/l.tdm (Llama-3.2-1B), by 4 threads
#   dev_ncu_tg BY          where ncu is found and the call is under BY s: ncu of a tg16 bench of /tmp/tb/d.tdm (CUDA
#                          prefill and decode) into the log by kernel (dev_ncu_agg), the CSV into $OUT/ncu-t.csv.gz
#   dev_gpu_tests          the GPU tests of $B (test_cuda_moe, test_engine_conf's CUDA runs on the three conformance
#                          models carried (twice: by default and TANDEM_CUDA_DEC_MMA_FROM=0), test_cuda, test_cuda_decode, test_cuda_gemv where carried): their counts
#                          and failures into the log
#   dev_peer_start J [N SHAPE GGUF]  llama.cpp's CUDA build (J jobs) in L := $R/tmp/llb and a bf16 GGUF of SHAPE cut
#                          to N layers (tools/make_moe_gguf.py; default qwen3-30b-a3b, 8, /tmp/tb/q-bf16.gguf), both in
#                          the background (BP, GP)
#   dev_peer_q4            waits for those, then /tmp/tb/q-q4_0.gguf (llbench quantize), the bf16 one removed
#   dev_ncu_agg CSV        an ncu --csv run's gpu__time_duration.sum by kernel name into the log: launches, total
#                          and mean microseconds, the 30 largest totals
#   dev_peer_tail BY M     waits for llama.cpp's build until BY s into the call; if built by BY + 15 s, M's GGUF
#                          (/tmp/tb/M-bf16.gguf) quantized to Q4_0 and /tmp/tb/M.tdm's pp512 / tg128 beside it in
#                          one invocation (into $W/peer1.md and the log); then the bench errors, and "done"
#   dev_peer_round N       round N of pp512 / tg128, $B's tandem beside that Q4_0 in one invocation (--peer
#                          llama.cpp), into $W/peerN.md / .json and the log
dev_init() {
    R=$(pwd); OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" build /tmp/tb; A=$OUT/$1; P=$R/tmp/pk; W=/tmp/w
    mkdir -p $W $P; T0=$(date +%s)
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv >> "$A" 2>&1
    [ -z "$2" ] || tar -C $P -xJf tmp/$2.tar.xz
    export LD_LIBRARY_PATH=$P/lib TM_SHARED=$P/shared TANDEM_GEMV=avx512 LLB_MAX_FOREIGN=${LLB_MAX_FOREIGN:-100}
    B=$P/bin
}
st() { echo "== $1 at $(( $(date +%s) - T0 )) s" >> "$A"; }
dev_peer_build() {
    ( cd $1 && cmake -S . -B b -G Ninja -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release \
        -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF \
        -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_COMMON=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF -DGGML_NATIVE=OFF \
        -DGGML_CCACHE=OFF > b.log 2>&1 && timeout 420 nice -n 10 ninja -C b -j $2 llama >> b.log 2>&1 ) || return 1
    gcc -O2 -include "$(pwd)/tools/llbench_gpu.h" -I $1/include -I $1/ggml/include $1/llbench.c -o $1/llbench \
        -L $1/b/bin -lllama -lggml -lggml-base -Wl,-rpath,$1/b/bin >> $1/b.log 2>&1
}
dev_moe_shape() {
    $B/tandem synth --like qwen3-30b-a3b --layers 8 -o $1/q > /dev/null 2>> $A &&
        $B/tandem convert $1/q -o $1/q.tdm --threads ${2:-8} > $W/convert.txt 2>&1
}
dev_shapes() { # dev_shapes N X:LIKE[:LAYERS] ...: /tmp/tb/X.tdm for each, converted by N threads
    n=$1; shift
    for m in "$@"; do
        x=${m%%:*}; y=${m#*:}; k=${y#*:}; [ "$k" = "$y" ] && k=
        $B/tandem synth --like ${y%%:*} ${k:+--layers $k} -o /tmp/tb/$x > /dev/null 2>> $A
        $B/tandem convert /tmp/tb/$x -o /tmp/tb/$x.tdm --threads $n > $W/convert-$x.txt 2>&1; tail -1 $W/convert-$x.txt >> $A
        rm -rf /tmp/tb/$x
    done
}
dev_dec_shapes() { dev_shapes 4 d:deepseek-v2-lite:4 l:llama-3.2-1b; }
dev_ncu_tg() {
    NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
    [ -n "$NCU" ] && [ $(( $(date +%s) - T0 )) -lt $1 ] || return 0
    timeout 100 $NCU --clock-control none --metrics gpu__time_duration.sum --csv \
        $B/tandem bench /tmp/tb/d.tdm -t 4 --tests tg16 --reps 1 --prefill cuda --decode cuda > $W/ncu-t.csv 2> $W/ncu-t.err
    st "ncu (rc $?)"; dev_ncu_agg $W/ncu-t.csv; gzip -c $W/ncu-t.csv > $OUT/ncu-t.csv.gz
}
dev_gpu_tests() {
    ( timeout 150 $B/test_cuda_moe ) > $W/moe.txt 2>&1; grep -E "CHECK|passed|kernel:" $W/moe.txt | head -20 >> $A
    ( TM_CONF_MODELS=${TM_CONF_MODELS:-llama3,qwen3_moe,qwen3} TM_CONF_ENGINE=cuda timeout 200 $B/test_engine_conf ) > $W/conf.txt 2>&1
    grep -E "CHECK|passed" $W/conf.txt | head -12 >> $A
    # again with the grouped decode attention at every span (the default keeps it to long contexts on dense
    # GQA models, and the conformance prompts are short): both kernels over the conformance models carried
    echo "test_engine_conf, TANDEM_CUDA_DEC_MMA_FROM=0:" >> $A
    ( TANDEM_CUDA_DEC_MMA_FROM=0 TM_CONF_MODELS=${TM_CONF_MODELS:-llama3,qwen3_moe,qwen3} TM_CONF_ENGINE=cuda \
      timeout 200 $B/test_engine_conf ) > $W/conf0.txt 2>&1
    grep -E "CHECK|passed" $W/conf0.txt | head -12 >> $A
    ( timeout 60 $B/test_cuda ) > $W/cuda.txt 2>&1; grep -E "CHECK|passed|SKIP" $W/cuda.txt | head -8 >> $A
    ( timeout 90 $B/test_cuda_decode ) > $W/dec.txt 2>&1; grep -E "CHECK|passed|SKIP" $W/dec.txt | head -8 >> $A
    [ ! -x $B/test_cuda_gemv ] || { ( timeout 120 $B/test_cuda_gemv ) > $W/gemv-t.txt 2>&1
        grep -E "CHECK|passed|SKIP" $W/gemv-t.txt | head -8 >> $A; }
}
dev_peer_start() {
    L=$R/tmp/llb; mkdir -p $L && tar -C $L -xJf tmp/peer.tar.xz
    ( dev_peer_build $L $1; echo "peer build rc $?" >> $L/b.log ) &
    BP=$!
    ( PYTHONPATH=$L/gguf-py python3 $R/tools/make_moe_gguf.py ${4:-/tmp/tb/q-bf16.gguf} ${2:-8} ${3:-qwen3-30b-a3b} \
        > $W/gguf.txt 2>&1 ) &
    GP=$!
}
dev_peer_q4() {
    wait $GP; st "wait peer build"; wait $BP; tail -1 $L/b.log | cut -c1-200 >> $A
    st quantize
    [ -x $L/llbench ] && timeout 120 $L/llbench quantize /tmp/tb/q-bf16.gguf /tmp/tb/q-q4_0.gguf q4_0 16 > $W/quant.txt 2>&1
    rm -f /tmp/tb/q-bf16.gguf
}
dev_peer_round() {
    timeout 75 $B/tandem bench /tmp/tb/q.tdm -t 4 --tests pp512,tg128 --reps 3 --prefill cuda --decode cuda \
        --peer llama.cpp --peer-model /tmp/tb/q-q4_0.gguf --peer-bin $L/llbench --md $W/peer$1.md > $W/peer$1.json 2>> $W/bench.err
    echo "-- round $1: tandem int4 vs llama.cpp Q4_0, both CUDA" >> $A; grep -E '^\| ' $W/peer$1.md >> $A
}
dev_ncu_agg() { python3 - "$1" >> $A <<'PY'
import csv, sys, collections
rows = list(csv.reader(open(sys.argv[1], errors="replace")))
h = next((i for i, r in enumerate(rows) if "Kernel Name" in r), None)
if h is None: print("no ncu table"); sys.exit()
H = rows[h]; k = H.index("Kernel Name"); v = H.index("Metric Value"); u = H.index("Metric Unit")
t = collections.defaultdict(lambda: [0, 0.0])
for r in rows[h + 1:]:
    if len(r) <= v: continue
    try: x = float(r[v].replace(",", ""))
    except ValueError: continue
    x = x / 1000 if r[u] in ("ns", "nsecond") else x * 1000 if r[u] in ("ms", "msecond") else x
    t[r[k][:90]][0] += 1; t[r[k][:90]][1] += x
tot = sum(a[1] for a in t.values())
print("kernels %d, total %.1f us" % (sum(a[0] for a in t.values()), tot))
for n, (c, s) in sorted(t.items(), key=lambda e: -e[1][1])[:30]:
    print("%6d %10.1f us %8.2f us/launch  %s" % (c, s, s / c, n))
PY
}
dev_peer_tail() {
    while [ $(( $(date +%s) - T0 )) -lt $1 ] && kill -0 $BP 2>/dev/null; do sleep 5; done
    st "peer build"; tail -1 $L/b.log | cut -c1-200 >> $A
    if [ -x $L/llbench ] && [ $(( $(date +%s) - T0 )) -lt $(( $1 + 15 )) ]; then
        timeout 40 $L/llbench quantize /tmp/tb/$2-bf16.gguf /tmp/tb/$2-q4_0.gguf q4_0 16 > $W/quant.txt 2>&1
        timeout 50 $B/tandem bench /tmp/tb/$2.tdm -t 4 --tests pp512,tg128 --reps 3 --prefill cuda --decode cuda \
            --peer llama.cpp --peer-model /tmp/tb/$2-q4_0.gguf --peer-bin $L/llbench --md $W/peer1.md > /dev/null 2>> $W/bench.err
        echo "-- tandem int4 vs llama.cpp Q4_0, both CUDA" >> $A; grep -E '^\| ' $W/peer1.md >> $A
    fi
    grep -iE "error|fail" $W/bench.err | head -6 | cut -c1-250 >> $A
    st done
}
