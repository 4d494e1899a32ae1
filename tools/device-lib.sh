# tools/device-lib.sh: the pieces the device scripts share (sourced, POSIX sh), run from the repository root on
# the lent GPU machine:
#   dev_init LOG PKG       $OUT made, A := $OUT/LOG (the call's log), st NAME appends "== NAME at T s", the GPU's
#                          name and memory logged, tmp/PKG.tar.xz (bin/, lib/, shared/) unpacked into P, B := $P/bin,
#                          the environment the binaries need exported
#   dev_peer_build DIR J   llama.cpp's CUDA build (sm_90) in DIR (tmp/peer.tar.xz unpacked there), J jobs, then
#                          DIR/llbench (tools/llbench_gpu.h: every layer on the GPU); its log DIR/b.log
#   dev_moe_shape DIR [N]  the Qwen3-30B-A3B shape cut to 8 layers (tandem synth) and its default package DIR/q.tdm
#                          (converted by N threads, default 8; its log $W/convert.txt)
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
