#!/bin/bash
# session 21, run 103: test_kernels on the real tiles with the GEMM split of runs 101-102
. tools/devbench.sh; db_init 103; db_build build/tests/test_kernels || exit 1
timeout 150 build/tests/test_kernels 2>&1 | grep -iE "passed|fail|SKIP|variant" | tail -8 | tee -a $A
