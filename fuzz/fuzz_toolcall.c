/* fuzz/fuzz_toolcall.c: tool calls (text/toolcall.h) on arbitrary bytes.
 * Input: a first byte choosing the dialect (mod 4; bits 6 and 7 both set: mistral_args, or with bit 0 harmony
 * (gpt-oss: the reply read by text/harmony.h, its calls but no content required back), with bit 1
 * deepseek_v3, with bits 1 and 0 command_r, bit 6 alone qwen3_coder
 * or with bit 0 seed_oss or with bit 1 kimi_k2, bit 7 alone glm or with bit 0 minimax), the cut flag (bit 2, also the grammar's
 * parallel flag), the lazy grammar's form (bit 3; for mistral, mistral_args and granite also their form with
 * the markers kept as special tokens, tm_tool_dialect_kept, with [CALL_ID] where bit 5), thinking and an opened block for the reply
 * reader (bits 4, 5; the reasoning family the one whose markers the reply shows, else <think>), then a tools array
 * (JSON), a NUL, then a reply (no NUL: the input is all tools, with a fixed reply). Checked
 * invariants: tm_tool_check accepts or refuses with a message; the parse never fails but for
 * memory, and gives content (all the reply when it finds no calls) and calls whose names are
 * declared and whose arguments are JSON objects; the hold-back never exceeds the text and never
 * shrinks as the text grows; the reasoning split's spans lie in order within every prefix; the
 * server's reply reader streamed byte by byte adds up to the whole reply (up to trimmed whitespace),
 * and with its calls streamed as they are written (tm_reply_stream_calls), their pieces add up to the
 * whole reply's calls wherever that reads as calls and was not cut; every prefix's partial reading
 * (tm_tool_parse_partial) agrees with those calls;
 * a grammar is made for well-formed tools or refused with a message,
 * and a grammar made compiles. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "serve/reply.h"
#include "text/grammar.h"
#include "text/reasoning.h"
#include "text/toolcall.h"

/* a stream's call pieces put together: n calls, each name, id and arguments (NULL where out of memory) */
typedef struct pieced {
    int n;
    char *name[16], *id[16], *args[16];
} pieced;

static void piece_up(pieced *c, const tm_reply_part *p)
{
    for (int i = 0; i < p->n_cd; i++) {
        const tm_oai_call_delta *d = &p->cd[i];
        if (d->index != c->n - 1 + (d->name != NULL) || (d->name && !d->id)) __builtin_trap(); /* in order, first named */
        if (d->index >= 16) continue;
        if (d->name) c->n++, c->name[d->index] = strdup(d->name), c->id[d->index] = strdup(d->id), c->args[d->index] = strdup("");
        char *a = c->args[d->index];
        size_t l = a ? strlen(a) : 0;
        char *na = a ? realloc(a, l + d->args_len + 1) : NULL;
        if (na) memcpy(na + l, d->args, d->args_len), na[l + d->args_len] = '\0';
        c->args[d->index] = na;
        if (!na) free(a);
    }
}

/* every marker a special token of the (imagined) vocabulary */
static int all_special(void *ud, const char *text)
{
    (void)ud, (void)text;
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    static const char *names[] = {"hermes", "llama3_json", "mistral", "granite", "mistral_args",
                                  "qwen3_coder", "seed_oss", "glm", "minimax", "harmony", "deepseek_v3", "command_r",
                                  "kimi_k2"};
    int hi = data[0] & 0xC0, lo = data[0] & 1, b1 = data[0] & 2;
    const tm_tool_dialect *d = tm_tool_dialect_named(names[hi == 0xC0 ? (b1 ? 10 + lo : 4 + 5 * lo)
                                                           : hi == 0x40 ? (b1 ? 12 : 5 + lo)
                                                           : hi == 0x80 ? 7 + lo
                                                                        : data[0] & 3]);
    tm_tool_dialect kd; /* mistral's, mistral_args' and granite's form with their markers kept (bit 3; bit 5: a
                           template that shows [CALL_ID]) */
    if ((data[0] >> 3) & 1 && tm_tool_dialect_kept(d, (data[0] >> 5) & 1 ? "[CALL_ID]" : "", all_special, NULL, &kd))
        d = &kd;
    int cut = (data[0] >> 2) & 1;
    data++;
    size--;
    const uint8_t *nul = memchr(data, 0, size);
    size_t tl = nul ? (size_t)(nul - data) : size;
    char *tools = malloc(tl + 1);
    if (!tools) return 0;
    memcpy(tools, data, tl);
    tools[tl] = '\0';
    const char *reply = nul ? (const char *)nul + 1 : "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>";
    size_t rl = nul ? size - tl - 1 : strlen(reply);
    char *rz = malloc(rl + 1); /* the reply NUL-terminated: its markers name the reasoning family */
    if (!rz) {
        free(tools);
        return 0;
    }
    memcpy(rz, reply, rl);
    rz[rl] = '\0';
    const tm_think_markers *fam = tm_think_detect(rz);
    free(rz);
    if (!fam) fam = &tm_think_tags;

    tm_err err = {0};
    int ok = tm_tool_check(tools, &err) == TM_OK;
    if (!ok && !err.msg[0]) __builtin_trap();
    tm_tool_calls c;
    if (tm_tool_parse(d, reply, rl, tools, cut, &c, &err) == TM_OK) {
        if (!c.content || c.content_len > rl ||
            (c.n == 0 && !d->harmony && (c.content_len != rl || memcmp(c.content, reply, rl))))
            __builtin_trap();
        for (int i = 0; i < c.n; i++) {
            cJSON *a = cJSON_Parse(c.v[i].arguments);
            if (!cJSON_IsObject(a) || !c.v[i].name[0]) __builtin_trap();
            cJSON_Delete(a);
        }
        tm_tool_calls_free(&c);
    }
    size_t prev = 0;
    for (size_t k = 0; k <= rl && k <= 512; k++) {
        size_t s = tm_tool_safe_prefix(d, reply, k);
        if (s > k || s < prev) __builtin_trap();
        prev = s;
    }
    /* the reasoning split of the reply: spans in order and within it, for every prefix */
    for (size_t k = 0; k <= rl && k <= 512; k++) {
        tm_think_span sp;
        tm_think_split(fam, reply, k, cut, k == rl, &sp);
        if (sp.r0 > sp.r1 || sp.r1 > k || sp.c0 > sp.c1 || sp.c1 > k) __builtin_trap();
    }
    /* the server's reply reader: streamed byte by byte, its parts add up to the whole reply's */
    if (rl <= 512) {
        const tm_think_markers *think = (data[-1] >> 4) & 1 ? fam : NULL;
        int opened = (data[-1] >> 5) & 1;
        tm_reply a, b;
        tm_reply_init(&a, d, tools, think, opened, d->harmony);
        tm_reply_init(&b, d, tools, think, opened, d->harmony);
        tm_reply_stream_calls(&a, 5);
        pieced pc = {0};
        char *rs = malloc(rl + 1), *cs = malloc(rl + 1);
        size_t rn = 0, cn = 0;
        int ok2 = rs && cs;
        tm_reply_part p;
        for (size_t k = 0; k < rl && ok2; k++) {
            ok2 = tm_reply_add(&a, reply + k, 1) == 0 && tm_reply_delta(&a, &p) == 0;
            if (ok2) piece_up(&pc, &p);
            if (rn + p.reasoning_len > rl || cn + p.content_len > rl) __builtin_trap();
            memcpy(rs + rn, p.reasoning, p.reasoning_len), rn += p.reasoning_len;
            memcpy(cs + cn, p.content, p.content_len), cn += p.content_len;
        }
        if (ok2 && tm_reply_finish(&a, cut, 1) == 0 && tm_reply_add(&b, reply, rl) == 0 && tm_reply_finish(&b, cut, 1) == 0 &&
            tm_reply_rest(&a, &p) == 0) {
            piece_up(&pc, &p);
            /* the calls' pieces: the whole reply's calls, where it reads as calls and was not cut */
            if (p.tc.n && !cut && !d->harmony) { /* (harmony's calls are each read alone: one read in part may
                                                     turn out not to be one, and the next takes its number) */
                if (pc.n != p.tc.n) __builtin_trap();
                for (int i = 0; i < pc.n && i < 16; i++)
                    if (pc.name[i] && pc.id[i] && pc.args[i] &&
                        (strcmp(pc.name[i], p.tc.v[i].name) || strcmp(pc.id[i], p.tc.v[i].id) ||
                         strcmp(pc.args[i], p.tc.v[i].arguments)))
                        __builtin_trap();
            }
            if (rn + p.reasoning_len > rl || cn + p.content_len > rl) __builtin_trap();
            memcpy(rs + rn, p.reasoning, p.reasoning_len), rn += p.reasoning_len;
            memcpy(cs + cn, p.content, p.content_len), cn += p.content_len;
            tm_reply_part w;
            tm_reply_whole(&b, &w);
            if (rn != w.reasoning_len || memcmp(rs, w.reasoning, rn) || p.tc.n != w.tc.n) __builtin_trap();
            size_t m = cn < w.content_len ? cn : w.content_len;
            if (memcmp(cs, w.content, m)) __builtin_trap();
            for (size_t i = m; i < cn; i++) /* past the whole answer: only whitespace the parser trimmed */
                if (!(cs[i] == ' ' || cs[i] == '\n' || cs[i] == '\t' || cs[i] == '\r')) __builtin_trap();
            if (cn < w.content_len) __builtin_trap();
        }
        free(rs);
        free(cs);
        for (int i = 0; i < pc.n && i < 16; i++) free(pc.name[i]), free(pc.id[i]), free(pc.args[i]);
        tm_reply_free(&a);
        tm_reply_free(&b);
    }
    char *gbnf = NULL;
    int rc = tm_tool_grammar(d, tools, NULL, cut, (data[-1] >> 3) & 1, &gbnf, &err);
    if (rc == TM_OK) {
        if (!ok || !gbnf) __builtin_trap();
        tm_grammar *g = NULL;
        int grc = tm_grammar_parse(&g, gbnf, strlen(gbnf), &err);
        if (grc != TM_OK && grc != TM_E_LIMIT && grc != TM_E_NOMEM) __builtin_trap();
        tm_grammar_free(g);
    } else if (gbnf || !err.msg[0]) {
        __builtin_trap();
    }
    free(gbnf);
    free(tools);
    return 0;
}
