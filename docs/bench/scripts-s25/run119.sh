#!/bin/bash
# session 25, run 119: transformers 5 fixtures for GPT-2, and its modeling source
cd "$(dirname "$0")/.." || exit 1
python3 tools/gen_refs.py /tmp/refs gpt2 gpt2_default_inner 2>&1 | grep -v "Loading weights\|Writing model" | tail -30
mkdir -p /tmp/src
T=$(python3 -c "import transformers, os; print(os.path.dirname(transformers.__file__))")
cp $T/models/gpt2/modeling_gpt2.py $T/models/gpt2/configuration_gpt2.py /tmp/src/
python3 - <<'PY'
import json
from safetensors import safe_open
for n in ("gpt2", "gpt2_default_inner"):
    with safe_open(f"/tmp/refs/{n}/hf/model.safetensors", "pt") as f:
        print(n, sorted(f.keys())[:8], len(list(f.keys())))
PY
cd /tmp && tar czf $OUT/r119.tgz refs src && ls -la $OUT
