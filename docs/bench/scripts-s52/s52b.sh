#!/bin/sh
# session 52, call 2 (transformers on the lent machine, no GPU needed):
#   1. tools/gen_refs.py fixtures for GLM-4.5 (Glm4MoeForCausalLM) and Seed-OSS (SeedOssForCausalLM), and the
#      transformers sources they come from (modeling / configuration);
#   2. tools/gen_template_refs.py renders of the three templates session 52 added to tests/data/chat_templates
#      (Command R7B's tool_use, Cohere2MoE, Ministral 3 Reasoning).
R=$(pwd); OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" build /tmp/tb; A=$OUT/b.txt; T0=$(date +%s)
st() { echo "== $1 at $(( $(date +%s) - T0 )) s" >> "$A"; }
python3 -c "import transformers, torch; print('transformers', transformers.__version__, 'torch', torch.__version__)" >> $A 2>&1
st refs
timeout 300 python3 tools/gen_refs.py /tmp/refs glm4_moe glm4_moe_qk glm4_moe_lite ernie4_5_moe dots1 seed_oss seed_oss_obias > /tmp/refs.log 2>&1
grep -v "Loading weights\|Writing model" /tmp/refs.log | tail -40 >> $A
mkdir -p /tmp/src
T=$(python3 -c "import transformers, os; print(os.path.dirname(transformers.__file__))")
for m in glm4_moe glm4_moe_lite ernie4_5_moe dots1 seed_oss deepseek_v3; do cp $T/models/$m/modeling_$m.py $T/models/$m/configuration_$m.py /tmp/src/ 2>> $A; done
st templates
mkdir -p /tmp/tpl
for f in Cohere2MoE CohereForAI-c4ai-command-r7b-12-2024-tool_use mistralai-Ministral-3-14B-Reasoning-2512; do
  cp tests/data/chat_templates/$f.jinja /tmp/tpl/; done
timeout 200 python3 tools/gen_template_refs.py /tmp/tpl > /tmp/tpl.log 2>&1; tail -20 /tmp/tpl.log >> $A
cd /tmp && tar czf $OUT/s52b.tgz refs src tpl refs.log tpl.log
st done
