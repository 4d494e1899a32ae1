#!/bin/sh
# tools/devdeps.sh: fill .devdeps/ (git-ignored), what the lent GPU machine's host lacks to build
# and measure tandem there: carried with the device tool's `carry: [".devdeps"]` (about 17 MB).
#   .devdeps/build.sh         make with the carried headers and libraries: sh .devdeps/build.sh TARGETS
#   .devdeps/include, lib/    cJSON, PCRE2, utf8proc, libmicrohttpd (and libmicrohttpd's own
#                             dependencies) from this machine's Debian packages
#   .devdeps/peer/            llama.cpp side by side: llbench, node-llama-cpp's libllama/libggml
#                             (the Sapphire Rapids CPU variant included), gguf-py and
#                             make_synth_gguf.py to write the GGUFs there, ceilings.c
# Needs tools/deps.sh's packages and ../shared/peers/setup.sh run once (the peer in
# $HOME/.cache/tandem-peers). The scripts of docs/bench/scripts-s*/ run from the repo root there.
set -e
cd "$(dirname "$0")/.."
D=.devdeps P=${PEERS:-$HOME/.cache/tandem-peers} S=../shared/peers
B=$P/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64
[ -x "$P/llbench" ] && [ -d "$B" ] || { echo "devdeps: no peer in $P: run $S/setup.sh first" >&2; exit 1; }
mkdir -p $D/lib $D/include $D/peer/lib
cp -r /usr/include/cjson /usr/include/pcre2.h /usr/include/utf8proc.h /usr/include/microhttpd.h $D/include/
for l in libcjson libpcre2-8 libutf8proc libmicrohttpd libgnutls libp11-kit libidn2 libunistring libtasn1 \
         libnettle libhogweed libgmp libffi; do
  cp -P /usr/lib/x86_64-linux-gnu/$l.so* $D/lib/ 2>/dev/null || cp -P /lib/x86_64-linux-gnu/$l.so* $D/lib/
done
cp "$B"/libggml-base.so "$B"/libggml-cpu-sapphirerapids.so "$B"/libggml-cpu-x64.so "$B"/libggml.v0.4.0.so \
   "$B"/libllama.v0.4.0.so $D/peer/lib/
cp "$P/llbench" $D/peer/ && cp -r "$P/llama.cpp/gguf-py" $D/peer/
cp $S/make_synth_gguf.py $S/ceilings.c $S/llbench.c $D/peer/
cat > $D/build.sh <<'EOS'
#!/bin/sh
# make targets on the device machine with the carried headers and libraries
D=$(pwd)/.devdeps
make -j16 CC="gcc -I$D/include -I$D/include/cjson -L$D/lib -Wl,-rpath,$D/lib" "$@"
EOS
du -sh $D
