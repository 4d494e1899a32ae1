/* serve/oai_resp.c: the JSON the server sends (serve/oai.h). Written with a
 * small string builder rather than cJSON: text pieces are length-delimited
 * (they may hold NUL) and a stream chunk is built per token. */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve/oai.h"

typedef struct sb {
    char *p;
    size_t n, cap;
    int oom;
} sb;

static int sb_reserve(char **p, size_t *n, size_t *cap, size_t add)
{
    if (*n + add + 1 <= *cap) return 0;
    size_t c = *cap ? *cap : 256;
    while (c < *n + add + 1) c *= 2;
    char *q = realloc(*p, c);
    if (!q) return -1;
    *p = q;
    *cap = c;
    return 0;
}

static void sb_put(sb *b, const char *s, size_t len)
{
    if (b->oom || sb_reserve(&b->p, &b->n, &b->cap, len)) {
        b->oom = 1;
        return;
    }
    memcpy(b->p + b->n, s, len);
    b->n += len;
    b->p[b->n] = '\0';
}

static void sb_puts(sb *b, const char *s) { sb_put(b, s, strlen(s)); }

static void sb_printf(sb *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sb *b, const char *fmt, ...)
{
    char tmp[256];
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (k < 0 || (size_t)k >= sizeof tmp) b->oom = 1; /* never with the formats used here */
    else sb_put(b, tmp, (size_t)k);
}

static void sb_str(sb *b, const char *s, size_t len)
{
    if (!b->oom && tm_oai_json_string(&b->p, &b->n, &b->cap, s, len)) b->oom = 1;
}

static void sb_cstr_or_null(sb *b, const char *s)
{
    if (s) sb_str(b, s, strlen(s));
    else sb_puts(b, "null");
}

static char *sb_done(sb *b)
{
    if (b->oom) {
        free(b->p);
        return NULL;
    }
    return b->p;
}

/* Length of the valid UTF-8 sequence at s[0..n), 0 if it is not one
 * (overlong forms, surrogates and code points above U+10FFFF are invalid). */
static size_t utf8_len(const unsigned char *s, size_t n)
{
    unsigned c = s[0];
    size_t k;
    uint32_t cp;
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) { k = 2; cp = c & 0x1F; }
    else if (c >= 0xE0 && c <= 0xEF) { k = 3; cp = c & 0x0F; }
    else if (c >= 0xF0 && c <= 0xF4) { k = 4; cp = c & 0x07; }
    else return 0;
    if (n < k) return 0;
    for (size_t i = 1; i < k; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        cp = cp << 6 | (s[i] & 0x3F);
    }
    if ((k == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) || (k == 4 && (cp < 0x10000 || cp > 0x10FFFF)))
        return 0;
    return k;
}

int tm_oai_json_string(char **buf, size_t *n, size_t *cap, const char *s, size_t len)
{
    /* worst case: every byte becomes \u00XX (6) or U+FFFD (3) */
    if (len > (SIZE_MAX - 3) / 6 || sb_reserve(buf, n, cap, 6 * len + 2)) return -1;
    char *w = *buf + *n;
    const unsigned char *p = (const unsigned char *)s, *end = p + len;
    *w++ = '"';
    while (p < end) {
        unsigned c = *p;
        if (c >= 0x80) {
            size_t k = utf8_len(p, (size_t)(end - p));
            if (k) {
                memcpy(w, p, k);
                w += k;
                p += k;
            } else {
                memcpy(w, "\xEF\xBF\xBD", 3);
                w += 3;
                p++;
            }
            continue;
        }
        p++;
        if (c == '"' || c == '\\') { *w++ = '\\'; *w++ = (char)c; }
        else if (c == '\n') { *w++ = '\\'; *w++ = 'n'; }
        else if (c == '\r') { *w++ = '\\'; *w++ = 'r'; }
        else if (c == '\t') { *w++ = '\\'; *w++ = 't'; }
        else if (c < 0x20 || c == 0x7F) {
            static const char hex[] = "0123456789abcdef";
            memcpy(w, "\\u00", 4);
            w[4] = hex[c >> 4];
            w[5] = hex[c & 15];
            w += 6;
        } else *w++ = (char)c;
    }
    *w++ = '"';
    *w = '\0';
    *n = (size_t)(w - *buf);
    return 0;
}

char *tm_oai_error_json(const tm_oai_error *e)
{
    sb b = {0};
    sb_puts(&b, "{\"error\":{\"message\":");
    sb_str(&b, e->msg, strlen(e->msg));
    sb_puts(&b, ",\"type\":");
    sb_cstr_or_null(&b, e->type ? e->type : "invalid_request_error");
    sb_puts(&b, ",\"param\":");
    sb_cstr_or_null(&b, e->param[0] ? e->param : NULL);
    sb_puts(&b, ",\"code\":");
    sb_cstr_or_null(&b, e->code);
    sb_puts(&b, "}}");
    return sb_done(&b);
}

size_t tm_oai_lp_chars(const char *bytes, size_t len)
{
    const unsigned char *p = (const unsigned char *)bytes;
    size_t n = 0;
    for (size_t i = 0; i < len; n++) {
        size_t k = p[i] < 0x80 ? 1 : utf8_len(p + i, len - i);
        i += k ? k : 1;
    }
    return n;
}

static void lp_num(sb *b, float x)
{
    if (isnan(x)) sb_puts(b, "null"); /* an echoed prompt's first token: nothing predicts it */
    else sb_printf(b, "%.9g", x > -9999.0f ? (double)x : -9999.0);
}

/* {"token", "logprob", "bytes"} (chat) */
static void lp_tok(sb *b, const tm_oai_lp_tok *t)
{
    sb_puts(b, "{\"token\":");
    sb_str(b, t->bytes, t->len);
    sb_puts(b, ",\"logprob\":");
    lp_num(b, t->logprob);
    sb_puts(b, ",\"bytes\":[");
    for (size_t i = 0; i < t->len; i++) sb_printf(b, i ? ",%u" : "%u", (unsigned)(unsigned char)t->bytes[i]);
    sb_puts(b, "]");
}

static void logprobs_chat(sb *b, const tm_oai_logprobs *lp)
{
    sb_puts(b, "{\"content\":[");
    for (size_t i = 0; i < lp->n; i++) {
        const tm_oai_logprob *e = &lp->v[i];
        if (i) sb_puts(b, ",");
        lp_tok(b, &e->tok);
        sb_puts(b, ",\"top_logprobs\":[");
        for (int k = 0; k < e->n_top; k++) {
            if (k) sb_puts(b, ",");
            lp_tok(b, &e->top[k]);
            sb_puts(b, "}");
        }
        sb_puts(b, "]}");
    }
    sb_puts(b, "],\"refusal\":null}");
}

/* completions: parallel arrays; a top_logprobs object keeps the first (most likely) of tokens whose
 * strings are the same */
static void logprobs_completion(sb *b, const tm_oai_logprobs *lp)
{
    sb_puts(b, "{\"tokens\":[");
    for (size_t i = 0; i < lp->n; i++) {
        if (i) sb_puts(b, ",");
        sb_str(b, lp->v[i].tok.bytes, lp->v[i].tok.len);
    }
    sb_puts(b, "],\"token_logprobs\":[");
    for (size_t i = 0; i < lp->n; i++) {
        if (i) sb_puts(b, ",");
        lp_num(b, lp->v[i].tok.logprob);
    }
    sb_puts(b, "],\"top_logprobs\":[");
    for (size_t i = 0; i < lp->n; i++) {
        const tm_oai_logprob *e = &lp->v[i];
        if (i) sb_puts(b, ",");
        if (isnan(e->tok.logprob)) {
            sb_puts(b, "null");
            continue;
        }
        sb_puts(b, "{");
        for (int k = 0, first = 1; k < e->n_top; k++) {
            int dup = 0;
            for (int j = 0; j < k && !dup; j++)
                dup = e->top[j].len == e->top[k].len && !memcmp(e->top[j].bytes, e->top[k].bytes, e->top[k].len);
            if (dup) continue;
            if (!first) sb_puts(b, ",");
            first = 0;
            sb_str(b, e->top[k].bytes, e->top[k].len);
            sb_puts(b, ":");
            lp_num(b, e->top[k].logprob);
        }
        sb_puts(b, "}");
    }
    sb_puts(b, "],\"text_offset\":[");
    size_t off = lp->text_offset;
    for (size_t i = 0; i < lp->n; i++) {
        sb_printf(b, i ? ",%zu" : "%zu", off);
        off += tm_oai_lp_chars(lp->v[i].tok.bytes, lp->v[i].tok.len);
    }
    sb_puts(b, "]}");
}

static void logprobs(sb *b, int chat, const tm_oai_logprobs *lp)
{
    sb_puts(b, ",\"logprobs\":");
    if (!lp) sb_puts(b, "null");
    else if (chat) logprobs_chat(b, lp);
    else logprobs_completion(b, lp);
}

static void head(sb *b, const tm_oai_meta *m, const char *object)
{
    sb_puts(b, "{\"id\":");
    sb_cstr_or_null(b, m->id);
    sb_printf(b, ",\"object\":\"%s\",\"created\":%" PRId64 ",\"model\":", object, m->created);
    sb_cstr_or_null(b, m->model);
    sb_puts(b, ",\"system_fingerprint\":\"tandem-" TANDEM_VERSION_STRING "\"");
}

static void usage(sb *b, const tm_oai_usage *u)
{
    sb_printf(b, "\"usage\":{\"prompt_tokens\":%d,\"completion_tokens\":%d,\"total_tokens\":%d,"
              "\"prompt_tokens_details\":{\"cached_tokens\":%d}}",
              u->prompt, u->completion, u->prompt + u->completion, u->cached);
}

/* ,"tool_calls":[{"id","type":"function","function":{"name","arguments"}}, ...] */
static void tool_calls(sb *b, const tm_oai_tool_calls *tc)
{
    sb_puts(b, ",\"tool_calls\":[");
    for (int i = 0; i < tc->n; i++) {
        const tm_oai_tool_call *c = &tc->v[i];
        sb_puts(b, i ? ",{" : "{");
        sb_puts(b, "\"id\":");
        sb_cstr_or_null(b, c->id);
        sb_puts(b, ",\"type\":\"function\",\"function\":{\"name\":");
        sb_cstr_or_null(b, c->name);
        sb_puts(b, ",\"arguments\":");
        sb_cstr_or_null(b, c->arguments);
        sb_puts(b, "}}");
    }
    sb_puts(b, "]");
}

/* ,"tool_calls":[{"index":i[,"id","type":"function"],"function":{["name",]"arguments"}}, ...]: a stream's pieces */
static void call_deltas(sb *b, const tm_oai_call_delta *cd, int n)
{
    sb_puts(b, ",\"tool_calls\":[");
    for (int i = 0; i < n; i++) {
        sb_printf(b, "%s{\"index\":%d,", i ? "," : "", cd[i].index);
        if (cd[i].id) {
            sb_puts(b, "\"id\":");
            sb_cstr_or_null(b, cd[i].id);
            sb_puts(b, ",\"type\":\"function\",");
        }
        sb_puts(b, "\"function\":{");
        if (cd[i].name) {
            sb_puts(b, "\"name\":");
            sb_cstr_or_null(b, cd[i].name);
            sb_puts(b, ",");
        }
        sb_puts(b, "\"arguments\":");
        sb_str(b, cd[i].args ? cd[i].args : "", cd[i].args_len);
        sb_puts(b, "}}");
    }
    sb_puts(b, "]");
}

/* "id":{"logprob","rank","decoded_token"} */
static void plp_tok(sb *b, int32_t id, const tm_oai_lp_tok *t, int32_t rank)
{
    sb_printf(b, "\"%d\":{\"logprob\":", (int)id);
    lp_num(b, t->logprob);
    sb_printf(b, ",\"rank\":%d,\"decoded_token\":", (int)rank);
    sb_str(b, t->bytes, t->len);
    sb_puts(b, "}");
}

/* ,"prompt_logprobs":[null, {the token, then the alternatives not the token}, ...] */
static void prompt_logprobs(sb *b, const tm_oai_plps *p)
{
    sb_puts(b, ",\"prompt_logprobs\":[");
    for (size_t i = 0; i < p->n; i++) {
        const tm_oai_logprob *e = &p->v[i];
        const tandem_logprob *id = &p->ids[i];
        if (i) sb_puts(b, ",");
        if (isnan(e->tok.logprob)) {
            sb_puts(b, "null");
            continue;
        }
        sb_puts(b, "{");
        plp_tok(b, id->token, &e->tok, id->rank);
        for (int k = 0; k < e->n_top; k++)
            if (id->top_token[k] != id->token) {
                sb_puts(b, ",");
                plp_tok(b, id->top_token[k], &e->top[k], k + 1);
            }
        sb_puts(b, "}");
    }
    sb_puts(b, "]");
}

char *tm_oai_response_json(const tm_oai_meta *m, const tm_oai_choice *c, int n, const tm_oai_usage *u)
{
    sb b = {0};
    int chat = m->kind == TM_OAI_CHAT;
    head(&b, m, chat ? "chat.completion" : "text_completion");
    sb_puts(&b, ",\"choices\":[");
    for (int i = 0; i < n; i++) {
        const tm_oai_extra *x = c[i].x;
        const tm_oai_tool_calls *tc = x ? x->tc : NULL;
        int calls = chat && tc && tc->n > 0;
        char ix[32];
        snprintf(ix, sizeof ix, "%s{\"index\":%d,", i ? "," : "", i);
        sb_puts(&b, ix);
        if (chat) {
            sb_puts(&b, "\"message\":{\"role\":\"assistant\",\"content\":");
            if ((calls || (x && x->reasoning_len)) && !c[i].len) sb_puts(&b, "null");
            else sb_str(&b, c[i].text, c[i].len);
            if (x && x->reasoning_len) {
                sb_puts(&b, ",\"reasoning_content\":");
                sb_str(&b, x->reasoning, x->reasoning_len);
            }
            if (calls) tool_calls(&b, tc);
            sb_puts(&b, "}");
        } else {
            sb_puts(&b, "\"text\":");
            sb_str(&b, c[i].text, c[i].len);
        }
        logprobs(&b, chat, c[i].lp);
        if (!chat && c[i].plp) prompt_logprobs(&b, c[i].plp);
        sb_puts(&b, ",\"finish_reason\":");
        sb_cstr_or_null(&b, c[i].finish);
        sb_puts(&b, "}");
    }
    sb_puts(&b, "]");
    if (chat && n > 0 && c[0].plp) prompt_logprobs(&b, c[0].plp);
    sb_puts(&b, ",");
    usage(&b, u);
    sb_puts(&b, "}");
    return sb_done(&b);
}

char *tm_oai_chunk_sse(const tm_oai_meta *m, const char *text, size_t len, int role, const tm_oai_extra *x,
                       const tm_oai_logprobs *lp, const char *finish)
{
    int ncd = x && x->cd ? x->n_cd : 0;
    size_t rl = x && x->reasoning ? x->reasoning_len : 0;
    sb b = {0};
    int chat = m->kind == TM_OAI_CHAT;
    sb_puts(&b, "data: ");
    head(&b, m, chat ? "chat.completion.chunk" : "text_completion");
    char ix[32];
    snprintf(ix, sizeof ix, ",\"choices\":[{\"index\":%d,", m->index);
    sb_puts(&b, ix);
    if (chat) {
        sb_puts(&b, "\"delta\":{");
        if (role) sb_puts(&b, "\"role\":\"assistant\"");
        int any = role;
        if (len || role) {
            sb_puts(&b, role ? ",\"content\":" : "\"content\":");
            sb_str(&b, text, len);
            any = 1;
        }
        if (rl) {
            sb_puts(&b, any ? ",\"reasoning_content\":" : "\"reasoning_content\":");
            sb_str(&b, x->reasoning, rl);
            any = 1;
        }
        if (ncd > 0) {
            if (!any) sb_puts(&b, "\"content\":null");
            call_deltas(&b, x->cd, ncd);
        }
        sb_puts(&b, "}");
    } else {
        sb_puts(&b, "\"text\":");
        sb_str(&b, text, len);
    }
    logprobs(&b, chat, lp);
    sb_puts(&b, ",\"finish_reason\":");
    sb_cstr_or_null(&b, finish);
    sb_puts(&b, "}]}\n\n");
    return sb_done(&b);
}

char *tm_oai_usage_sse(const tm_oai_meta *m, const tm_oai_usage *u)
{
    sb b = {0};
    sb_puts(&b, "data: ");
    head(&b, m, m->kind == TM_OAI_CHAT ? "chat.completion.chunk" : "text_completion");
    sb_puts(&b, ",\"choices\":[],");
    usage(&b, u);
    sb_puts(&b, "}\n\n");
    return sb_done(&b);
}

/* {"id", "object": "model", "created", "owned_by", "max_model_len"} */
static void model_obj(sb *b, const char *model, int64_t created, int max_ctx)
{
    sb_puts(b, "{\"id\":");
    sb_cstr_or_null(b, model);
    sb_printf(b, ",\"object\":\"model\",\"created\":%" PRId64 ",\"owned_by\":\"tandem\"", created);
    if (max_ctx > 0) sb_printf(b, ",\"max_model_len\":%d", max_ctx);
    sb_puts(b, "}");
}

char *tm_oai_models_json(const char *model, int64_t created, int max_ctx)
{
    sb b = {0};
    sb_puts(&b, "{\"object\":\"list\",\"data\":[");
    model_obj(&b, model, created, max_ctx);
    sb_puts(&b, "]}");
    return sb_done(&b);
}

char *tm_oai_model_json(const char *model, int64_t created, int max_ctx)
{
    sb b = {0};
    model_obj(&b, model, created, max_ctx);
    return sb_done(&b);
}
