/* text/tok_regex.c: HF patterns on PCRE2, and the per-call work area.
 *
 * `tokenizers` compiles its regexes with Oniguruma (Ruby syntax, UTF-8) and
 * literal patterns as escaped regexes. We compile with PCRE2_UTF | PCRE2_UCP
 * (so \s \d \p{L} are Unicode-aware) and JIT, after translating the few
 * Oniguruma constructs whose meaning differs in PCRE2:
 *   \h \H  hex digit (PCRE2: horizontal space)  -> [0-9a-fA-F] / [^0-9a-fA-F]
 *   \w \W  Onig: Letter|Mark|Nd|Pc (PCRE2 10.42 UCP: L|N|_) -> explicit classes
 *   (?m)   Ruby's "dot matches newline"           -> (?s)
 *   ^ $    Ruby anchors are always per line         -> PCRE2_MULTILINE
 * Searching follows rust-onig's find_iter: an empty match right after the
 * previous match is skipped by advancing one character. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/tok_impl.h"

#define WORD_CLASS "\\p{L}\\p{M}\\p{Nd}\\p{Pc}"

/* translate Oniguruma syntax to PCRE2 (see the header comment) */
static int translate(const char *p, size_t n, tok_buf *out)
{
    int in_class = 0;
    for (size_t i = 0; i < n; i++) {
        char c = p[i];
        int rc = TM_OK;
        if (c == '\\' && i + 1 < n) {
            char e = p[i + 1];
            i++;
            if (e == 'h') rc = tok_buf_append(out, in_class ? "0-9a-fA-F" : "[0-9a-fA-F]", in_class ? 9 : 11);
            else if (e == 'H' && !in_class) rc = tok_buf_append(out, "[^0-9a-fA-F]", 12);
            else if (e == 'w') rc = in_class ? tok_buf_append(out, WORD_CLASS, strlen(WORD_CLASS))
                                             : tok_buf_append(out, "[" WORD_CLASS "]", strlen(WORD_CLASS) + 2);
            else if (e == 'W' && !in_class) rc = tok_buf_append(out, "[^" WORD_CLASS "]", strlen(WORD_CLASS) + 3);
            else {
                char two[2] = {'\\', e};
                rc = tok_buf_append(out, two, 2);
            }
        } else if (c == '[') {
            if (in_class && i + 1 < n && p[i + 1] == ':') { /* POSIX class [:alpha:] */
                const char *end = memchr(p + i, ']', n - i);
                size_t l = end ? (size_t)(end - (p + i)) + 1 : 1;
                rc = tok_buf_append(out, p + i, l);
                i += l - 1;
            } else {
                if (!in_class && i + 1 < n && p[i + 1] == '^') {
                    rc = tok_buf_append(out, "[^", 2);
                    i++;
                    if (i + 1 < n && p[i + 1] == ']') { /* literal ] first */
                        rc = rc ? rc : tok_buf_append(out, "]", 1);
                        i++;
                    }
                } else if (!in_class && i + 1 < n && p[i + 1] == ']') {
                    rc = tok_buf_append(out, "[]", 2);
                    i++;
                } else {
                    rc = tok_buf_append(out, "[", 1);
                }
                in_class++;
            }
        } else if (c == ']' && in_class) {
            in_class--;
            rc = tok_buf_append(out, "]", 1);
        } else if (c == '(' && !in_class && i + 2 < n && p[i + 1] == '?' && strchr("imx-", p[i + 2])) {
            /* inline option group (?imx-imx) or (?imx-imx:...): Ruby's m is PCRE2's s */
            size_t j = i + 2;
            while (j < n && p[j] && strchr("imx-", p[j])) j++;
            if (j < n && (p[j] == ':' || p[j] == ')')) {
                rc = tok_buf_append(out, "(?", 2);
                for (size_t k = i + 2; k < j && rc == TM_OK; k++) {
                    char o = p[k] == 'm' ? 's' : p[k];
                    rc = tok_buf_append(out, &o, 1);
                }
                i = j - 1;
            } else {
                rc = tok_buf_append(out, &c, 1);
            }
        } else {
            rc = tok_buf_append(out, &c, 1);
        }
        if (rc != TM_OK) return rc;
    }
    return TM_OK;
}

int tok_regex_compile(tok_regex *re, const char *pat, size_t len, int literal, const char *name,
                      const char *where, tm_err *err)
{
    re->code = NULL;
    if (len > TOK_MAX_PATTERN)
        return tm_errf(err, TM_E_LIMIT, "%s: %s: pattern of %zu bytes exceeds the limit of %d", name, where,
                       len, TOK_MAX_PATTERN);
    if (!tok_utf8_valid(pat, len, NULL))
        return tm_errf(err, TM_E_FORMAT, "%s: %s: pattern is not valid UTF-8", name, where);
    tok_buf src = {0};
    uint32_t opts = PCRE2_UTF | PCRE2_NO_UTF_CHECK;
    if (literal) {
        opts |= PCRE2_LITERAL; /* (UCP is not allowed with LITERAL, nor needed) */
        if (tok_buf_append(&src, pat, len) != TM_OK) return tm_errf(err, TM_E_NOMEM, "%s: out of memory", name);
    } else {
        opts |= PCRE2_UCP | PCRE2_MULTILINE;
        if (tok_buf_reserve(&src, len) != TM_OK || translate(pat, len, &src) != TM_OK) {
            tok_buf_free(&src);
            return tm_errf(err, TM_E_NOMEM, "%s: out of memory", name);
        }
    }
    int ec = 0;
    PCRE2_SIZE eo = 0;
    pcre2_compile_context *cc = pcre2_compile_context_create(NULL);
    if (cc) pcre2_set_max_pattern_length(cc, TOK_MAX_PATTERN * 4);
    re->code = pcre2_compile((PCRE2_SPTR)(src.p ? src.p : ""), src.len, opts, &ec, &eo, cc);
    pcre2_compile_context_free(cc);
    tok_buf_free(&src);
    if (!re->code) {
        PCRE2_UCHAR msg[200];
        pcre2_get_error_message(ec, msg, sizeof msg);
        return tm_errf(err, TM_E_FORMAT, "%s: %s: bad regex at offset %zu: %s", name, where, (size_t)eo,
                       (const char *)msg);
    }
    pcre2_jit_compile(re->code, PCRE2_JIT_COMPLETE); /* falls back to the interpreter if unavailable */
    return TM_OK;
}

void tok_regex_free(tok_regex *re)
{
    pcre2_code_free(re->code);
    re->code = NULL;
}

int tok_regex_find(const tok_regex *re, tok_work *w, const char *s, size_t n, tok_matches *out, tm_err *err)
{
    out->n = 0;
    if (n == 0) return tok_matches_push(out, 0, 0, 0) ? tm_errf(err, TM_E_NOMEM, "%s: out of memory", w->name) : TM_OK;
    size_t prev = 0, pos = 0, last_match_end = (size_t)-1;
    while (pos <= n) {
        int rc = pcre2_match(re->code, (PCRE2_SPTR)s, n, pos, PCRE2_NO_UTF_CHECK, w->md, w->mctx);
        if (rc == PCRE2_ERROR_JIT_STACKLIMIT && !w->jit) {
            /* the default 32 KiB JIT stack was too small: give it 1 MiB and retry */
            w->jit = pcre2_jit_stack_create(32 * 1024, 1024 * 1024, NULL);
            if (!w->jit) goto oom;
            pcre2_jit_stack_assign(w->mctx, NULL, w->jit);
            continue;
        }
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) {
            PCRE2_UCHAR msg[200];
            pcre2_get_error_message(rc, msg, sizeof msg);
            return tm_errf(err, rc == PCRE2_ERROR_MATCHLIMIT || rc == PCRE2_ERROR_JIT_STACKLIMIT ||
                                        rc == PCRE2_ERROR_HEAPLIMIT || rc == PCRE2_ERROR_DEPTHLIMIT
                                    ? TM_E_LIMIT
                                    : TM_E_INVALID,
                           "%s: regex search failed: %s", w->name, (const char *)msg);
        }
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(w->md);
        size_t ms = ov[0], me = ov[1];
        if (ms > me || me > n) break; /* \K tricks: ignore */
        if (ms == me && me == last_match_end) {
            if (pos >= n) break;
            pos += tok_utf8_len((unsigned char)s[pos]);
            continue;
        }
        if (ms < prev) ms = prev; /* cannot happen without lookbehind games */
        if (ms != prev && tok_matches_push(out, prev, ms, 0)) goto oom;
        if (tok_matches_push(out, ms, me, 1)) goto oom;
        prev = me;
        pos = me;
        last_match_end = me;
    }
    if (prev != n && tok_matches_push(out, prev, n, 0)) goto oom;
    return TM_OK;
oom:
    return tm_errf(err, TM_E_NOMEM, "%s: out of memory", w->name);
}

/* ---- the per-call work area ---------------------------------------------- */

int tok_work_init(tok_work *w, size_t input_len, const char *name, tm_err *err)
{
    memset(w, 0, sizeof *w);
    w->name = name;
    w->limit = input_len > ((size_t)-1 - (1u << 20)) / (TOK_GROWTH + 1) ? (size_t)-1 : input_len * TOK_GROWTH + (1u << 20);
    w->md = pcre2_match_data_create(1, NULL);
    w->mctx = pcre2_match_context_create(NULL);
    w->jit = NULL; /* created on demand (tok_regex_find) */
    if (!w->md || !w->mctx) {
        tok_work_free(w);
        return tm_errf(err, TM_E_NOMEM, "%s: out of memory", name);
    }
    pcre2_set_match_limit(w->mctx, TOK_MATCH_LIMIT);
    pcre2_set_depth_limit(w->mctx, 10000);
    pcre2_set_heap_limit(w->mctx, 64 * 1024); /* KiB */
    return TM_OK;
}

void tok_work_free(tok_work *w)
{
    tok_buf_free(&w->text);
    free(w->pa.v);
    free(w->pb.v);
    free(w->m.v);
    free(w->m2.v);
    pcre2_match_data_free(w->md);
    pcre2_match_context_free(w->mctx);
    if (w->jit) pcre2_jit_stack_free(w->jit);
    free(w->ids);
    free(w->syms);
    free(w->heap);
    free(w->uni);
    tok_strmap_free(&w->cache.map);
    tok_arena_free(&w->cache.keys);
    free(w->cache.ids);
    free(w->cache.ent_off);
    free(w->cache.ent_len);
    memset(w, 0, sizeof *w);
}

int tok_work_push_id(tok_work *w, int32_t id)
{
    if (w->n_ids == w->cap_ids) {
        size_t cap = w->cap_ids ? w->cap_ids * 2 : 256;
        int32_t *v = realloc(w->ids, cap * sizeof *v);
        if (!v) return TM_E_NOMEM;
        w->ids = v;
        w->cap_ids = cap;
    }
    w->ids[w->n_ids++] = id;
    return TM_OK;
}

int tok_work_add_text(tok_work *w, const char *s, size_t n, tok_piece *out, tm_err *err)
{
    if (w->text.len + n > w->limit)
        return tm_errf(err, TM_E_LIMIT, "%s: the pipeline grew the text beyond %dx the input (normalizer or pre_tokenizer)",
                       w->name, TOK_GROWTH);
    /* s may point into w->text itself: re-derive it after a possible realloc */
    uintptr_t base = (uintptr_t)w->text.p, sp = (uintptr_t)s;
    int inside = w->text.p && sp >= base && sp < base + w->text.len;
    size_t so = inside ? (size_t)(sp - base) : 0;
    if (tok_buf_reserve(&w->text, n) != TM_OK) return tm_errf(err, TM_E_NOMEM, "%s: out of memory", w->name);
    if (inside) s = w->text.p + so;
    out->off = w->text.len;
    out->len = n;
    if (n) memmove(w->text.p + w->text.len, s, n);
    w->text.len += n;
    w->text.p[w->text.len] = 0;
    return TM_OK;
}
