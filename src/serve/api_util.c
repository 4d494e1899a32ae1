/* serve/api_util.c: the cJSON helpers the other APIs' writers share (serve/anthropic.c,
 * serve/responses.c): SSE events named by their "type", typed objects, ownership-safe attaching. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "serve/serve-impl.h"

char *tm_api_print_del(cJSON *o)
{
    char *s = o ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    return s;
}

int tm_api_add_strn(cJSON *o, const char *key, const char *s, size_t n)
{
    char *t = strndup(s ? s : "", n);
    int ok = t && cJSON_AddStringToObject(o, key, t);
    free(t);
    return ok;
}

cJSON *tm_api_typed(const char *type)
{
    cJSON *o = cJSON_CreateObject();
    if (o && !cJSON_AddStringToObject(o, "type", type)) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

int tm_api_attach(cJSON *o, const char *key, cJSON *child)
{
    if (o && child && cJSON_AddItemToObject(o, key, child)) return 1;
    cJSON_Delete(child);
    return 0;
}

char *tm_api_events(int n, cJSON **objs)
{
    char *acc = NULL;
    size_t len = 0;
    int ok = 1;
    for (int i = 0; i < n; i++) {
        const cJSON *t = objs[i] ? cJSON_GetObjectItemCaseSensitive(objs[i], "type") : NULL;
        const char *name = cJSON_IsString(t) ? t->valuestring : "";
        char *js = ok && objs[i] ? cJSON_PrintUnformatted(objs[i]) : NULL;
        size_t k = js ? strlen(name) + strlen(js) + 20 : 0;
        char *r = js ? realloc(acc, len + k) : NULL;
        if (r) acc = r, len += (size_t)snprintf(acc + len, k, "event: %s\ndata: %s\n\n", name, js);
        ok = ok && r;
        free(js);
        cJSON_Delete(objs[i]);
    }
    if (!ok) free(acc);
    return ok ? acc : (n ? NULL : strdup(""));
}
