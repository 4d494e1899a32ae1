/* tests/vocab_util.h: a model directory whose vocabulary has tokens a test chooses: the demo model with
 * some of its vocabulary entries renamed (test_serve_fim's fill-in-the-middle tokens, test_serve_tools'
 * tool-call markers). */
#ifndef TM_TESTS_VOCAB_UTIL_H
#define TM_TESTS_VOCAB_UTIL_H

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>

#include "harness.h"

/* tv_model_dir: dir (made if need be) := the model in src_dir (its files linked) with tokenizer.json's last
 * n vocabulary entries (ids V-n .. V-1) renamed to names[0 .. n), the merges that make or use an old
 * name dropped; name i is also a special added token where special is NULL or special[i] is nonzero
 * (else an ordinary token no merge makes: the model may write it, a text never tokenizes to it).
 * 0, or -1. */
static inline int tv_model_dir(const char *dir, const char *src_dir, const char *const *names, const int *special, int n)
{
    char path[PATH_MAX];
    mkdir(dir, 0755);
    snprintf(path, sizeof path, "%s/tokenizer.json", src_dir);
    char *text = th_slurp(path);
    cJSON *t = text ? cJSON_Parse(text) : NULL, *model = cJSON_GetObjectItem(t, "model");
    cJSON *vocab = cJSON_GetObjectItem(model, "vocab"), *merges = cJSON_GetObjectItem(model, "merges");
    cJSON *added = cJSON_GetObjectItem(t, "added_tokens");
    int ok = cJSON_IsObject(vocab) && cJSON_IsArray(merges) && cJSON_IsArray(added);
    int V = ok ? cJSON_GetArraySize(vocab) : 0;
    for (int k = 0; ok && k < n; k++) {
        int id = V - n + k;
        char old[256] = "";
        for (cJSON *e = vocab->child; e; e = e->next)
            if ((int)e->valuedouble == id) snprintf(old, sizeof old, "%s", e->string);
        ok = old[0] != 0;
        cJSON_DeleteItemFromObjectCaseSensitive(vocab, old); /* (names differing in case only are distinct) */
        ok = ok && cJSON_AddNumberToObject(vocab, names[k], id);
        for (cJSON *mg = merges->child, *next; ok && mg; mg = next) { /* merges that make or use it go */
            next = mg->next;
            const char *a = cJSON_GetArrayItem(mg, 0) ? cJSON_GetArrayItem(mg, 0)->valuestring : "";
            const char *b = cJSON_GetArrayItem(mg, 1) ? cJSON_GetArrayItem(mg, 1)->valuestring : "";
            char ab[512];
            snprintf(ab, sizeof ab, "%s%s", a, b);
            if (!strcmp(a, old) || !strcmp(b, old) || !strcmp(ab, old)) cJSON_Delete(cJSON_DetachItemViaPointer(merges, mg));
        }
        if (!ok || (special && !special[k])) continue;
        cJSON *at = cJSON_CreateObject();
        ok = at && cJSON_AddItemToArray(added, at);
        if (!ok) cJSON_Delete(at);
        ok = ok && cJSON_AddNumberToObject(at, "id", id) && cJSON_AddStringToObject(at, "content", names[k]) &&
             cJSON_AddFalseToObject(at, "single_word") && cJSON_AddFalseToObject(at, "lstrip") &&
             cJSON_AddFalseToObject(at, "rstrip") && cJSON_AddFalseToObject(at, "normalized") &&
             cJSON_AddTrueToObject(at, "special");
    }
    char *out = ok ? cJSON_PrintUnformatted(t) : NULL;
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    ok = out && th_write_file(path, out, strlen(out)) == 0;
    free(out);
    free(text);
    cJSON_Delete(t);
    static const char *const files[] = {"config.json", "model.safetensors", "tokenizer_config.json", "special_tokens_map.json"};
    return ok && th_link_files(dir, src_dir, files, sizeof files / sizeof files[0]) == 0 ? 0 : -1;
}

#endif
