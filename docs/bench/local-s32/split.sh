#!/bin/sh
# Session 32: split-N tasks for K in one chunk (AMX_SPLIT=1, build/tandem) against the session-31 split
# (AMX_SPLIT=0, /tmp/s0/tandem: make BUILD=/tmp/s0 CFLAGS='-O2 -g -DAMX_SPLIT=0' /tmp/s0/tandem),
# Qwen pp512, 6 interleaved pairs, TANDEM_PROFILE=warm (split.txt: split N on every one-chunk shape;
# split2.txt: only where N >= 4096, as shipped)
sh tools/localab.sh build/tandem /tmp/s0/tandem 6 qwen2.5-0.5b
