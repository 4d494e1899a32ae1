#!/bin/bash
# tools/device-amx.sh: the AMX measurement run on the lent H200 machine's Xeon
# (docs/benchmarks.md, "h200-host"). Run from the repo root there, with a
# carried folder .devdeps/ (git-ignored; tools/devdeps.sh fills it) holding what that machine lacks:
#   .devdeps/build.sh             make with -I/-L into .devdeps (cJSON, PCRE2, utf8proc,
#                                 libmicrohttpd headers and .so files copied from Debian)
#   .devdeps/include, lib/        those headers and libraries
#   .devdeps/peer/llbench, lib/   ../shared/peers' llbench and node-llama-cpp's libllama,
#                                 libggml, libggml-base, libggml-cpu-sapphirerapids
#   .devdeps/peer/gguf-py, make_synth_gguf.py, ceilings.c   from the peer setup
#   .devdeps/conformance/models   ../shared/conformance/models (test_engine_conf)
# Writes $OUT/all.txt and the bench JSON/markdown/SVG.
R=$(pwd); OUT=${OUT:-/tmp/out}; mkdir -p $OUT; A=$OUT/all.txt
export LD_LIBRARY_PATH=$R/.devdeps/lib
T0=$(date +%s); st() { echo "== $1 at $(( $(date +%s) - T0 )) s" | tee -a $A; }
mkdir -p ../shared 2>/dev/null; [ -e ../shared/conformance ] || ln -s $R/.devdeps/conformance ../shared/conformance
st build
sh .devdeps/build.sh build/tandem build/libtandem.a build/tests/test_kernels build/tests/test_attn build/tests/test_engine build/tests/test_engine_conf > /tmp/build.log 2>&1 || { tail -40 /tmp/build.log; exit 1; }
CF="-O2 -std=c11 -D_GNU_SOURCE -Isrc -Iinclude -I.devdeps/include -I.devdeps/include/cjson"
LL="-L.devdeps/lib -lcjson -lpcre2-8 -lutf8proc -lmicrohttpd -lm -pthread"
gcc $CF tools/kbench.c build/libtandem.a $LL -o build/kbench
gcc -O2 -march=sapphirerapids -pthread .devdeps/peer/ceilings.c -o build/ceilings -lm
st synth
( P=.devdeps/peer; mkdir -p /tmp/gg; PYTHONPATH=$P/gguf-py timeout 200 python3 $P/make_synth_gguf.py /tmp/gg llama1b > /tmp/gguf.log 2>&1
  LD_LIBRARY_PATH=$P/lib LLB_BACKEND_DIR=$P/lib $P/llbench quantize /tmp/gg/llama1b-bf16.gguf /tmp/gg/llama1b-q4_0.gguf q4_0 8 >> /tmp/gguf.log 2>&1 ) &
GG=$!
mkdir -p /tmp/tb; build/tandem synth --like llama-3.2-1b -o /tmp/tb/llama1b > /dev/null 2>&1
build/tandem convert /tmp/tb/llama1b -o /tmp/tb/l1b.tdm --threads 8 > /dev/null 2>> $A
build/tandem convert /tmp/tb/llama1b -o /tmp/tb/l1b-i8.tdm --prefill-enc int8 --head-enc int4g64 --threads 8 > /dev/null 2>> $A
st tests
( timeout 120 build/tests/test_kernels 2>&1 | grep -iE "amx|passed|fail|reference" | tail -12; timeout 120 build/tests/test_attn 2>&1 | grep -iE "amx|passed|fail" | tail -6; timeout 200 build/tests/test_engine 2>&1 | tail -2; timeout 250 build/tests/test_engine_conf 2>&1 | grep -E "cpu-amx|passed|FAIL" | tail -12 ) >> $A 2>&1
wait $GG; tail -1 /tmp/gguf.log >> $A
st ceilings-kbench
build/ceilings 1 3 2>&1 | grep -E "AMX.*2T" >> $A
for s in "bf16 512 2048 2048" "bf16 512 8192 2048" "bf16 512 2048 8192" "int8 512 2048 2048" "int8 512 8192 2048" "int8 512 2048 8192"; do echo "$(build/kbench -t 2 -s 0.5 -v amx gemm $s 2>&1 | grep -o 'gemm.*GFLOP/s')"; done >> $A 2>&1
build/ceilings 1 3 2>&1 | grep -E "AMX.*2T" >> $A
st bench
export LLB_BACKEND_DIR=$R/.devdeps/peer/lib LLB_MAX_FOREIGN=1000
BL="$R/.devdeps/lib:$R/.devdeps/peer/lib"
LD_LIBRARY_PATH=$BL timeout 400 build/tandem bench /tmp/tb/l1b-i8.tdm -t 2 --tests pp512,tg128,e448+64 --reps 3 --ceilings --peer llama.cpp --peer-model /tmp/gg/llama1b-q4_0.gguf --peer-bin $R/.devdeps/peer/llbench --md $OUT/xeon-i8-q4.md --svg $OUT/xeon-i8-q4.svg > $OUT/xeon-i8-q4.json 2>> $A
st bf16
LD_LIBRARY_PATH=$BL timeout 80 build/tandem bench /tmp/tb/l1b.tdm -t 2 --tests pp512 --reps 3 --peer llama.cpp --peer-model /tmp/gg/llama1b-q4_0.gguf --peer-bin $R/.devdeps/peer/llbench --md $OUT/xeon-bf16-q4.md > $OUT/xeon-bf16-q4.json 2>> $A
st profile
TANDEM_PROFILE=1 timeout 40 build/tandem bench /tmp/tb/l1b-i8.tdm -t 2 --tests pp512 --reps 2 2>&1 >/dev/null | grep -E "profile: prefill|bench pp" >> $A
st done
