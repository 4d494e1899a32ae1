#!/bin/bash
# session 25, run 123: transformers 5 fixture for OPT, and its source
cd "$(dirname "$0")/.." || exit 1
python3 tools/gen_refs.py /tmp/refs opt 2>&1 | grep -v "Loading weights\|Writing model" | tail -30
mkdir -p /tmp/src
T=$(python3 -c "import transformers, os; print(os.path.dirname(transformers.__file__))")
cp $T/models/opt/modeling_opt.py $T/models/opt/configuration_opt.py /tmp/src/
cd /tmp && tar czf $OUT/r123.tgz refs src && ls -la $OUT
