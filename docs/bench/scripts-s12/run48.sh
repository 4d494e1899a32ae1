#!/bin/bash
# session 12, run 48: the whole unit and conformance suite on the AMX host (the tokenizer
# fixtures are not carried: test_tokenizer/test_tokconfig/test_conformance's tokenizer part fail for that)
R=$(pwd); OUT=${OUT:-/tmp/out}; mkdir -p $OUT; A=$OUT/all48.txt
export LD_LIBRARY_PATH=$R/.devdeps/lib TM_SHARED=$R/.devdeps/shared
sh .devdeps/build.sh all > /tmp/build.log 2>&1 || { tail -30 /tmp/build.log | tee -a $A; exit 1; }
build/tandem devices 2>&1 | head -30 >> $A
timeout 500 sh tests/run.sh build/tests >> $A 2>&1
echo "rc $?" >> $A
