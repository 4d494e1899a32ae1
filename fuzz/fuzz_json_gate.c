/* fuzz/fuzz_json_gate.c: JSON mode's automaton (text/json_gate.h) on arbitrary bytes.
 * Input: the text. Checked invariants: the automaton takes a prefix of it (every prefix of
 * what it takes it also takes: it is fed byte by byte); where it takes the whole text and says
 * done, cJSON parses the text as an object; a refused byte leaves the state as it was (feeding
 * the same byte again is refused again); from any state it takes, some byte continues it or
 * it is done (it never paints itself into a corner). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "text/json_gate.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tm_jsm m;
    tm_jsm_init(&m);
    size_t i = 0;
    for (; i < size; i++) {
        if (!tm_jsm_feed(&m, data[i])) break;
    }
    if (i < size) {
        tm_jsm before = m;
        if (tm_jsm_feed(&m, data[i]) || memcmp(&before, &m, sizeof m)) __builtin_trap();
    }
    if (!tm_jsm_done(&m)) { /* some byte continues it */
        int any = 0;
        for (int c = 0; c < 256 && !any; c++) {
            tm_jsm t = m;
            any = tm_jsm_feed(&t, (unsigned char)c);
        }
        if (!any) __builtin_trap();
    }
    if (i == size && tm_jsm_done(&m)) {
        cJSON *j = cJSON_ParseWithLength((const char *)data, size);
        if (!j || !cJSON_IsObject(j)) __builtin_trap();
        cJSON_Delete(j);
    }
    return 0;
}
