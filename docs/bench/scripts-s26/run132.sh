#!/bin/bash
# session 26, run 132: transformers 5 fixtures for Arcee, ERNIE 4.5 and CodeGen, with their modeling sources
python3 tools/gen_refs.py /tmp/refs arcee ernie4_5 codegen > /tmp/refs.log 2>&1
tail -30 /tmp/refs.log
mkdir -p /tmp/src; T=$(python3 -c "import transformers, os; print(os.path.dirname(transformers.__file__))")
for m in arcee ernie4_5 codegen; do cp $T/models/$m/modeling_$m.py $T/models/$m/configuration_$m.py /tmp/src/ 2>/dev/null; done
cd /tmp && tar czf $OUT/r132.tgz refs src refs.log && ls -la $OUT
