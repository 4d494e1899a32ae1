#!/bin/bash
# session 20, run 97: the engine tests on the real tiles, the conformance models carried in .devconf
# (a copy of ../shared/conformance/models under .devconf/conformance; carry .devdeps/lib, .devdeps/include,
# .devdeps/build.sh and .devconf). test_engine ran without TM_SHARED, so its MoE case (which reads
# ../shared) failed to find its checkpoint: set TM_SHARED for both next time.
sh .devdeps/build.sh build/tests/test_engine_conf build/tests/test_engine > /tmp/b.log 2>&1 || tail -20 /tmp/b.log; export LD_LIBRARY_PATH=$PWD/.devdeps/lib TANDEM_GEMV=avx512; (TM_SHARED=$PWD/.devconf timeout 100 build/tests/test_engine_conf 2>&1 | grep -E "cpu-amx|SKIP|CHECK|passed"; timeout 100 build/tests/test_engine 2>&1 | grep -E "cpu-amx|SKIP|CHECK|passed") > $OUT/tests97.txt 2>&1; cat $OUT/tests97.txt
