#!/bin/bash
# session 26, run 128: transformers 5 fixtures for Nemotron, GraniteMoE and GraniteMoE-shared, with their
# modeling sources (run from the repository root)
python3 tools/gen_refs.py /tmp/refs nemotron granitemoe granitemoe_shared > /tmp/refs.log 2>&1
tail -30 /tmp/refs.log
mkdir -p /tmp/src; T=$(python3 -c "import transformers, os; print(os.path.dirname(transformers.__file__))")
for m in nemotron granitemoe granitemoeshared; do cp $T/models/$m/modeling_$m.py $T/models/$m/configuration_$m.py /tmp/src/ 2>/dev/null; done
cd /tmp && tar czf $OUT/r128.tgz refs src refs.log && ls -la $OUT
