/* fuzz/fuzz_template.c: libFuzzer target for chat templates (text/jinja.h).
 *
 * Input: a template source. It is compiled and, if that succeeds, rendered with a fixed
 * small conversation under tight limits, so every input ends quickly: no hang, no crash,
 * no leak, no unbounded allocation. Build with `make fuzz`, run e.g.
 *   build-fuzz/bin/fuzz_template -max_total_time=300 -timeout=10 fuzz/corpus/template */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "text/jinja.h"

static const char VARS[] =
    "{\"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\"},"
    " {\"role\": \"user\", \"content\": \"Hi <b> & \\\"you\\\" \\u00e9\\u65e5 \\ud83d\\udc4b\\n\\tok\"},"
    " {\"role\": \"assistant\", \"content\": \"<think>\\nhm\\n</think>\\n\\nHello\","
    "  \"tool_calls\": [{\"id\": \"abc123def\", \"type\": \"function\","
    "   \"function\": {\"name\": \"f\", \"arguments\": {\"x\": 1, \"y\": [1.5, null, true]}}}]},"
    " {\"role\": \"tool\", \"content\": \"{\\\"r\\\": 2}\", \"tool_call_id\": \"abc123def\"}],"
    " \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": {}}}],"
    " \"add_generation_prompt\": true, \"bos_token\": \"<s>\", \"eos_token\": \"</s>\","
    " \"enable_thinking\": false}";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 64 * 1024) return 0;
    tm_jinja *t;
    tm_err err;
    if (tm_jinja_compile(&t, (const char *)data, size, &err) != TM_OK) return 0;
    cJSON *vars = cJSON_Parse(VARS);
    const tm_jinja_limits lim = {1 << 20, 32 << 20, 100000, 40};
    char *out = NULL;
    size_t len;
    if (tm_jinja_render_ex(t, vars, "2025-07-26", &lim, &out, &len, &err) == TM_OK) free(out);
    cJSON_Delete(vars);
    tm_jinja_free(t);
    return 0;
}
