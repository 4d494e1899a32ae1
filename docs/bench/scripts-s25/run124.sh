#!/bin/bash
# session 25, run 124: transformers 5 fixtures for Falcon, and its source
cd "$(dirname "$0")/.." || exit 1
python3 tools/gen_refs.py /tmp/refs falcon_mq falcon_new 2>&1 | grep -v "Loading weights\|Writing model" | tail -30
mkdir -p /tmp/src
T=$(python3 -c "import transformers, os; print(os.path.dirname(transformers.__file__))")
cp $T/models/falcon/modeling_falcon.py $T/models/falcon/configuration_falcon.py /tmp/src/
cd /tmp && tar czf $OUT/r124.tgz refs src && ls -la $OUT
