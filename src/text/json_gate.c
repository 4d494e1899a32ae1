/* text/json_gate.c: JSON mode's automaton and its masks (design block in
 * json_gate.h). */
#include "text/json_gate.h"

#include <string.h>

#include "text/vocab_trie.h"

/* ---- the automaton ---- */

enum {
    J_START,      /* before the top-level object: whitespace or '{' */
    J_VALUE,      /* a value (after ':', or ',' in an array) */
    J_ARR_FIRST,  /* after '[': a value or ']' */
    J_OBJ_FIRST,  /* after '{': a key or '}' */
    J_KEY,        /* after ',' in an object: a key */
    J_COLON,      /* after a key */
    J_AFTER,      /* after a value inside a container: ',' or its closing bracket */
    J_DONE,       /* the top-level object is closed */
    J_STR,        /* in a string (key: m->key) */
    J_STR_ESC,    /* after a backslash */
    J_STR_U,      /* in a \u escape: sub of its 4 hex digits to come; u8_lo the first digit, u8_hi 1 where it must be a
                     low surrogate (DC00-DFFF) after a high one */
    J_STR_LOW,    /* after a high surrogate's \uD800-DBFF: sub 0 wants '\\', 1 wants 'u' */
    J_NUM_MINUS,  /* '-': a digit must come */
    J_NUM_ZERO,   /* a leading 0: '.', 'e' or the end */
    J_NUM_INT,    /* integer digits */
    J_NUM_DOT,    /* '.': a digit must come */
    J_NUM_FRAC,   /* fraction digits */
    J_NUM_E,      /* 'e': a sign or a digit */
    J_NUM_ESIGN,  /* the exponent's sign: a digit */
    J_NUM_EXP,    /* exponent digits */
    J_LIT,        /* true / false / null: letter sub of literal u8_hi */
};

static const char *const lits[3] = {"true", "false", "null"};

enum { JSM_KEY = 1, JSM_LF = 2, JSM_CR = 4 };

void tm_jsm_init(tm_jsm *m)
{
    memset(m, 0, sizeof *m);
    m->mode = J_START;
}

int tm_jsm_done(const tm_jsm *m) { return m->mode == J_DONE; }

static int is_ws(unsigned c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
static int is_digit(unsigned c) { return c >= '0' && c <= '9'; }
static int is_hex(unsigned c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }
static int top_is_object(const tm_jsm *m) { return (int)((m->stack >> (m->depth - 1)) & 1); }

static void value_end(tm_jsm *m) { m->mode = m->depth ? J_AFTER : J_DONE; }

static int push(tm_jsm *m, int object)
{
    if (m->depth >= TM_JSM_MAX_DEPTH) return 0;
    m->stack = (m->stack & ~(1ull << m->depth)) | ((uint64_t)object << m->depth);
    m->depth++;
    m->mode = object ? J_OBJ_FIRST : J_ARR_FIRST;
    return 1;
}

static int pop(tm_jsm *m, unsigned c)
{
    if (!m->depth || (c == '}') != top_is_object(m)) return 0;
    m->depth--;
    m->stack &= ~(1ull << m->depth);
    value_end(m);
    return 1;
}

/* the first byte of a value */
static int value_start(tm_jsm *m, unsigned c)
{
    switch (c) {
    case '{': return push(m, 1);
    case '[': return push(m, 0);
    case '"': m->mode = J_STR; m->flags &= (uint8_t)~JSM_KEY; return 1;
    case '-': m->mode = J_NUM_MINUS; return 1;
    case '0': m->mode = J_NUM_ZERO; return 1;
    case 't': case 'f': case 'n':
        m->mode = J_LIT;
        m->u8_hi = c == 't' ? 0 : c == 'f' ? 1 : 2;
        m->sub = 1;
        return 1;
    default:
        if (c >= '1' && c <= '9') { m->mode = J_NUM_INT; return 1; }
        return 0;
    }
}

/* a string's byte: UTF-8 checked as RFC 3629 does (no overlong forms, surrogates or > U+10FFFF) */
static int str_byte(tm_jsm *m, unsigned c)
{
    if (m->u8_need) {
        if (c < m->u8_lo || c > m->u8_hi) return 0;
        if (--m->u8_need) m->u8_lo = 0x80, m->u8_hi = 0xBF;
        else m->u8_lo = m->u8_hi = 0; /* a whole character: the state is as before it (the mask cache) */
        return 1;
    }
    if (c == '"') {
        if (m->flags & JSM_KEY) m->mode = J_COLON;
        else value_end(m);
        return 1;
    }
    if (c == '\\') { m->mode = J_STR_ESC; return 1; }
    if (c < 0x20) return 0;
    if (c < 0x80) return 1;
    uint8_t need = 0, lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) need = 1;
    else if (c == 0xE0) need = 2, lo = 0xA0;
    else if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF) need = 2;
    else if (c == 0xED) need = 2, hi = 0x9F;
    else if (c == 0xF0) need = 3, lo = 0x90;
    else if (c >= 0xF1 && c <= 0xF3) need = 3;
    else if (c == 0xF4) need = 3, hi = 0x8F;
    else return 0;
    m->u8_need = need, m->u8_lo = lo, m->u8_hi = hi;
    return 1;
}

static int step(tm_jsm *m, unsigned c);

/* a number may end here: c, if it is not the number's, is the next token's first byte */
static int num_end(tm_jsm *m, unsigned c)
{
    value_end(m);
    return step(m, c);
}

/* between tokens: whitespace c, at most TM_JSM_MAX_WS bytes in a row with one line break ("\n",
 * "\r" or "\r\n") among them */
static int space(tm_jsm *m, unsigned c)
{
    if (m->ws >= TM_JSM_MAX_WS) return 0;
    if (c == '\r') {
        if (m->flags & (JSM_LF | JSM_CR)) return 0;
        m->flags |= JSM_CR;
    } else if (c == '\n') {
        if (m->flags & JSM_LF) return 0;
        m->flags |= JSM_LF | JSM_CR;
    } else if ((m->flags & JSM_CR) && !(m->flags & JSM_LF)) {
        m->flags |= JSM_LF; /* "\r" alone was the break */
    }
    m->ws++;
    return 1;
}

static int step(tm_jsm *m, unsigned c)
{
    switch (m->mode) {
    case J_START: return is_ws(c) ? space(m, c) : c == '{' && push(m, 1);
    case J_VALUE: return is_ws(c) ? space(m, c) : value_start(m, c);
    case J_ARR_FIRST: return is_ws(c) ? space(m, c) : c == ']' ? pop(m, c) : value_start(m, c);
    case J_OBJ_FIRST:
        if (is_ws(c)) return space(m, c);
        if (c == '}') return pop(m, c);
        /* fall through */
    case J_KEY:
        if (is_ws(c)) return space(m, c);
        if (c != '"') return 0;
        m->mode = J_STR;
        m->flags |= JSM_KEY;
        return 1;
    case J_COLON: return is_ws(c) ? space(m, c) : c == ':' ? (m->mode = J_VALUE, 1) : 0;
    case J_AFTER:
        if (is_ws(c)) return space(m, c);
        if (c == ',') {
            m->mode = top_is_object(m) ? J_KEY : J_VALUE;
            return 1;
        }
        return (c == '}' || c == ']') && pop(m, c);
    case J_DONE: return 0;
    case J_STR: return str_byte(m, c);
    case J_STR_ESC:
        if (c == 'u') {
            m->mode = J_STR_U;
            m->sub = 4;
            m->u8_hi = 0;
            return 1;
        }
        if (!strchr("\"\\/bfnrt", (int)c) || !c) return 0;
        m->mode = J_STR;
        return 1;
    case J_STR_LOW: /* a high surrogate must be followed by an escaped low one (as cJSON and Python want) */
        if (c != (m->sub ? 'u' : '\\')) return 0;
        if (m->sub++) {
            m->mode = J_STR_U;
            m->sub = 4;
            m->u8_hi = 1;
        }
        return 1;
    case J_STR_U: {
        if (!is_hex(c)) return 0;
        unsigned v = is_digit(c) ? c - '0' : (c | 0x20) - 'a' + 10;
        if (m->sub == 4) {
            if (m->u8_hi && v != 0xD) return 0;
            m->u8_lo = (uint8_t)v;
        } else if (m->sub == 3 && m->u8_lo == 0xD) {
            if (m->u8_hi ? v < 0xC : v >= 0xC) return 0; /* not the low surrogate due, or a lone low one */
            m->u8_lo = !m->u8_hi && v >= 8 ? 0xFF : 0;   /* 0xFF: a high surrogate, its low one to come */
        } else if (m->sub == 3) {
            m->u8_lo = 0;
        }
        if (--m->sub == 0) {
            m->mode = m->u8_lo == 0xFF ? J_STR_LOW : J_STR;
            m->u8_lo = m->u8_hi = 0;
        }
        return 1;
    }
    case J_NUM_MINUS:
        if (c == '0') m->mode = J_NUM_ZERO;
        else if (c >= '1' && c <= '9') m->mode = J_NUM_INT;
        else return 0;
        return 1;
    case J_NUM_ZERO:
        if (c == '.') m->mode = J_NUM_DOT;
        else if (c == 'e' || c == 'E') m->mode = J_NUM_E;
        else return num_end(m, c);
        return 1;
    case J_NUM_INT:
        if (is_digit(c)) return 1;
        if (c == '.') m->mode = J_NUM_DOT;
        else if (c == 'e' || c == 'E') m->mode = J_NUM_E;
        else return num_end(m, c);
        return 1;
    case J_NUM_DOT:
        if (!is_digit(c)) return 0;
        m->mode = J_NUM_FRAC;
        return 1;
    case J_NUM_FRAC:
        if (is_digit(c)) return 1;
        if (c == 'e' || c == 'E') {
            m->mode = J_NUM_E;
            return 1;
        }
        return num_end(m, c);
    case J_NUM_E:
        if (c == '+' || c == '-') m->mode = J_NUM_ESIGN;
        else if (is_digit(c)) m->mode = J_NUM_EXP;
        else return 0;
        return 1;
    case J_NUM_ESIGN:
        if (!is_digit(c)) return 0;
        m->mode = J_NUM_EXP;
        return 1;
    case J_NUM_EXP: return is_digit(c) ? 1 : num_end(m, c);
    case J_LIT: {
        const char *w = lits[m->u8_hi];
        if ((unsigned char)w[m->sub] != c) return 0;
        if (!w[++m->sub]) {
            m->u8_hi = 0;
            m->sub = 0;
            value_end(m);
        }
        return 1;
    }
    }
    return 0;
}

int tm_jsm_feed(tm_jsm *m, unsigned char c)
{
    tm_jsm t = *m;
    if (!step(&t, c)) return 0;
    if (!is_ws(c) || t.mode == J_STR) { /* a non-space byte, or a space inside a string: a new run */
        t.ws = 0;
        t.flags &= (uint8_t)~(JSM_LF | JSM_CR);
    }
    *m = t;
    return 1;
}

/* ---- masks over the vocabulary trie ---- */

static int jsm_step(void *ctx, void *state, unsigned char c)
{
    (void)ctx;
    return tm_jsm_feed((tm_jsm *)state, c);
}

int tm_json_mask(tm_vocab_trie *t, const tm_jsm *m, float *logits)
{
    return tm_vocab_mask(t, 0, m, sizeof *m, jsm_step, NULL, logits);
}

int tm_json_advance(const tm_vocab_trie *t, tm_jsm *m, int32_t id)
{
    return tm_vocab_take(t, m, sizeof *m, jsm_step, NULL, id);
}
