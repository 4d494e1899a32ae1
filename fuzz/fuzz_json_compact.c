/* fuzz/fuzz_json_compact.c: a JSON value's compact text as far as it is certain (text/json_compact.h)
 * on arbitrary bytes. Checked invariants: the output for every prefix of the input is a prefix of the
 * output for the whole (what goes out is never taken back), and where cJSON reads a value at the
 * input's start, the whole input gives TM_JC_WHOLE, cJSON's end and exactly cJSON_PrintUnformatted
 * of it (the top-level value a container: a number the input ends with may go on). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "core/status.h"
#include "text/json_compact.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *s = (const char *)data;
    if (size > 4096) return 0;
    tm_jbuf whole = {0};
    size_t used = 0;
    int rc = tm_json_compact(s, size, &whole, &used);
    if (rc == TM_E_NOMEM) {
        free(whole.p);
        return 0;
    }
    const char *end = NULL;
    cJSON *v = cJSON_ParseWithLengthOpts(s, size, &end, 0);
    if (v && (cJSON_IsObject(v) || cJSON_IsArray(v))) {
        char *t = cJSON_PrintUnformatted(v);
        if (t && (rc != TM_JC_WHOLE || used != (size_t)(end - s) || whole.n != strlen(t) || memcmp(whole.p, t, whole.n)))
            __builtin_trap();
        free(t);
    }
    cJSON_Delete(v);
    for (size_t k = 0; k < size && k <= 512; k++) {
        tm_jbuf o = {0};
        size_t u = 0;
        int r = tm_json_compact(s, k, &o, &u);
        if (r != TM_E_NOMEM && (o.n > whole.n || (o.n && memcmp(o.p, whole.p, o.n)))) __builtin_trap();
        free(o.p);
    }
    free(whole.p);
    return 0;
}
