/* text/gmatch.c: the grammar matcher, a lazily built DFA over sets of
 * pushdown stacks (design block in grammar.h).
 *
 *   node   (pos, rest)      a stack: el[pos] a set to read next (a top), or the element to go on
 *                           with when a called rule ends (below the top); rest the node below, -1
 *   config (nodes, utf8)    the stacks alive (top node ids, sorted), the code point being read
 *                           (its bits so far, continuation bytes to come and the next one's range)
 *                           and whether the text so far is a whole match
 *   memo   (config, byte) -> config, or -1 where the byte is refused
 *
 * A config's successor on a code point: each top whose set holds it moves past its set, and the
 * closure expands what follows (a reference pushes its return node and goes to the rule's
 * alternatives; the end of an alternative pops to the node below; the end of the root's sets
 * accept). The closure keeps a visited set of (pos, rest), so nullable cycles end. */
#include "text/grammar-impl.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/grow.h"
#include "text/vocab_trie.h"

typedef struct gnode {
    int32_t pos, rest, depth;
} gnode;

typedef struct gcfg {
    int64_t off;        /* stack ids: ids[off .. off + n), sorted */
    int32_t n;
    uint32_t cp;        /* the code point's bits so far (need > 0) */
    uint8_t need;       /* UTF-8 continuation bytes to come */
    uint8_t lo, hi;     /* the next continuation byte's range */
    uint8_t accept;     /* the text so far is a whole match */
} gcfg;

/* an open-addressed table of int32 values (ids into an array) keyed through a callback-free
 * scheme: the caller compares; slots hold id + 1, 0 empty */
typedef struct itab {
    int32_t *slot;      /* [cap] */
    size_t cap, n;
} itab;

struct tm_gmatch {
    const tm_grammar *g;
    uint64_t tag;                   /* the trie's mask cache key: new whenever config ids change meaning */
    int32_t cur;                    /* the config after the text so far */
    int32_t limit;                  /* configs kept before a rebuild */
    int64_t cut;                    /* paths the bounds cut (invariant 4) */
    int broken;                     /* a rebuild failed (out of memory) after dropping the tables:
                                       every later call fails */
    gnode *node;                    /* [n_node] */
    int32_t n_node;
    size_t cap_node;
    itab node_t;                    /* nodes by (pos, rest) */
    gcfg *cfg;                      /* [n_cfg] */
    int32_t n_cfg;
    size_t cap_cfg;
    int32_t *ids;                   /* [n_ids] the configs' stack ids */
    int64_t n_ids;
    size_t cap_ids;
    itab cfg_t;                     /* configs by content */
    uint64_t *tr_key;               /* [tr_cap] memo: (config << 8 | byte) + 1, 0 empty */
    int32_t *tr_val;                /* [tr_cap] the next config, -1 refused */
    size_t tr_cap, n_tr;
    int32_t *work;                  /* [2 * n_work] the closure's (pos, rest) pairs to expand */
    int64_t n_work;
    size_t cap_work;
    int32_t *out;                   /* [n_out] the closure's tops */
    int32_t n_out;
    size_t cap_out;
    uint64_t *vis;                  /* [vis_cap] the closure's visited (pos, rest) */
    uint32_t *vis_gen;              /* [vis_cap] the closure that wrote the slot (0: none) */
    uint32_t gen;                   /* the closure running */
    size_t vis_cap, n_vis;
};

static atomic_uint_fast64_t serial = 1; /* tags: 0 is JSON mode's */

static uint64_t mix(uint64_t h)
{
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    return h ^ (h >> 33);
}

/* ---- interning ---- */

static uint64_t node_hash(int32_t pos, int32_t rest) { return mix((uint64_t)(uint32_t)pos << 32 | (uint32_t)rest); }

static uint64_t cfg_hash(const gcfg *c, const int32_t *ids)
{
    uint64_t h = mix((uint64_t)c->cp << 32 | (uint64_t)c->need << 24 | (uint64_t)c->lo << 16 | (uint64_t)c->hi << 8 | c->accept);
    for (int32_t i = 0; i < c->n; i++) h = mix(h ^ (uint32_t)ids[i]);
    return h;
}

static int cfg_equal(const tm_gmatch *m, const gcfg *a, const int32_t *aids, const gcfg *b)
{
    return a->n == b->n && a->cp == b->cp && a->need == b->need && a->lo == b->lo && a->hi == b->hi &&
           a->accept == b->accept && !memcmp(aids, m->ids + b->off, sizeof(int32_t) * (size_t)a->n);
}

/* itab_rehash: t at twice its size, each id's hash from hash_of */
static int itab_grow(tm_gmatch *m, itab *t, uint64_t (*hash_of)(const tm_gmatch *, int32_t))
{
    size_t cap = t->cap ? 2 * t->cap : 1024;
    int32_t *s = calloc(cap, sizeof *s);
    if (!s) return TM_E_NOMEM;
    for (size_t i = 0; i < t->cap; i++) {
        if (!t->slot[i]) continue;
        size_t j = hash_of(m, t->slot[i] - 1) & (cap - 1);
        while (s[j]) j = (j + 1) & (cap - 1);
        s[j] = t->slot[i];
    }
    free(t->slot);
    t->slot = s;
    t->cap = cap;
    return TM_OK;
}

static uint64_t node_hash_of(const tm_gmatch *m, int32_t id) { return node_hash(m->node[id].pos, m->node[id].rest); }
static uint64_t cfg_hash_of(const tm_gmatch *m, int32_t id) { return cfg_hash(&m->cfg[id], m->ids + m->cfg[id].off); }

/* node_get: the node (pos, rest); -1 past TM_GRAMMAR_MAX_DEPTH, TM_E_NOMEM (< -1) */
static int32_t node_get(tm_gmatch *m, int32_t pos, int32_t rest)
{
    int32_t depth = rest < 0 ? 1 : m->node[rest].depth + 1;
    if (depth > TM_GRAMMAR_MAX_DEPTH) return -1;
    if (2 * (m->node_t.n + 1) > m->node_t.cap && itab_grow(m, &m->node_t, node_hash_of)) return TM_E_NOMEM;
    size_t j = node_hash(pos, rest) & (m->node_t.cap - 1);
    for (; m->node_t.slot[j]; j = (j + 1) & (m->node_t.cap - 1)) {
        const gnode *n = &m->node[m->node_t.slot[j] - 1];
        if (n->pos == pos && n->rest == rest) return m->node_t.slot[j] - 1;
    }
    if (tm_grow((void **)&m->node, &m->cap_node, m->n_node + 1, sizeof *m->node)) return TM_E_NOMEM;
    m->node[m->n_node] = (gnode){pos, rest, depth};
    m->node_t.slot[j] = m->n_node + 1;
    m->node_t.n++;
    return m->n_node++;
}

/* cfg_get: the config c with stack ids ids[0 .. c->n) (sorted); < 0 on failure */
static int32_t cfg_get(tm_gmatch *m, const gcfg *c, const int32_t *ids)
{
    if (2 * (m->cfg_t.n + 1) > m->cfg_t.cap && itab_grow(m, &m->cfg_t, cfg_hash_of)) return TM_E_NOMEM;
    size_t j = cfg_hash(c, ids) & (m->cfg_t.cap - 1);
    for (; m->cfg_t.slot[j]; j = (j + 1) & (m->cfg_t.cap - 1))
        if (cfg_equal(m, c, ids, &m->cfg[m->cfg_t.slot[j] - 1])) return m->cfg_t.slot[j] - 1;
    if (m->n_cfg >= 4 * TM_GMATCH_MAX_CONFIGS || m->n_ids + c->n > ((int64_t)1 << 24))
        return TM_E_LIMIT; /* a mask that would need this many is refused (see tm_gmatch_mask) */
    if (tm_grow((void **)&m->cfg, &m->cap_cfg, m->n_cfg + 1, sizeof *m->cfg) ||
        tm_grow((void **)&m->ids, &m->cap_ids, m->n_ids + c->n, sizeof *m->ids))
        return TM_E_NOMEM;
    gcfg *n = &m->cfg[m->n_cfg];
    *n = *c;
    n->off = m->n_ids;
    if (c->n) memcpy(m->ids + m->n_ids, ids, sizeof(int32_t) * (size_t)c->n);
    m->n_ids += c->n;
    m->cfg_t.slot[j] = m->n_cfg + 1;
    m->cfg_t.n++;
    return m->n_cfg++;
}

/* ---- the closure ---- */

static int work_push(tm_gmatch *m, int32_t pos, int32_t rest)
{
    if (tm_grow((void **)&m->work, &m->cap_work, 2 * (m->n_work + 1), sizeof *m->work)) return TM_E_NOMEM;
    m->work[2 * m->n_work] = pos;
    m->work[2 * m->n_work + 1] = rest;
    m->n_work++;
    return TM_OK;
}

/* visit: 1 if (pos, rest) is new to this closure (and now marked), 0 if seen, < 0 on failure.
 * Slots of earlier closures (vis_gen != gen) count as empty, so a closure starts in O(1). */
static int visit(tm_gmatch *m, int32_t pos, int32_t rest)
{
    uint64_t k = (uint64_t)(uint32_t)pos << 32 | (uint32_t)(rest + 1);
    if (2 * (m->n_vis + 1) > m->vis_cap) {
        size_t cap = m->vis_cap ? 2 * m->vis_cap : 256;
        uint64_t *v = malloc(cap * sizeof *v);
        uint32_t *gv = calloc(cap, sizeof *gv);
        if (!v || !gv) return free(v), free(gv), TM_E_NOMEM;
        for (size_t i = 0; i < m->vis_cap; i++) {
            if (m->vis_gen[i] != m->gen) continue;
            size_t j = mix(m->vis[i]) & (cap - 1);
            while (gv[j] == m->gen) j = (j + 1) & (cap - 1);
            v[j] = m->vis[i];
            gv[j] = m->gen;
        }
        free(m->vis);
        free(m->vis_gen);
        m->vis = v;
        m->vis_gen = gv;
        m->vis_cap = cap;
    }
    size_t j = mix(k) & (m->vis_cap - 1);
    for (; m->vis_gen[j] == m->gen; j = (j + 1) & (m->vis_cap - 1))
        if (m->vis[j] == k) return 0;
    m->vis[j] = k;
    m->vis_gen[j] = m->gen;
    m->n_vis++;
    return 1;
}

static int by_id(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return x < y ? -1 : x > y;
}

/* closure: expand the work list; m->out := the tops (sorted, distinct), *accept whether a path
 * ended the root. Returns TM_OK, TM_E_LIMIT past TM_GRAMMAR_MAX_STACKS, TM_E_NOMEM. */
static int closure(tm_gmatch *m, int *accept)
{
    const tm_grammar *g = m->g;
    m->n_out = 0;
    *accept = 0;
    m->n_vis = 0;
    if (++m->gen == 0) { /* wrapped: forget every slot */
        if (m->vis_gen) memset(m->vis_gen, 0, sizeof *m->vis_gen * m->vis_cap);
        m->gen = 1;
    }
    int rc = TM_OK;
    while (m->n_work > 0 && !rc) {
        m->n_work--;
        int32_t pos = m->work[2 * m->n_work], rest = m->work[2 * m->n_work + 1];
        int v = visit(m, pos, rest);
        if (v <= 0) {
            rc = v;
            continue;
        }
        const tm_gelem *e = &g->el[pos];
        if (e->type == GE_SET) {
            int32_t id = node_get(m, pos, rest);
            if (id == -1) m->cut++;
            if (id < -1) rc = id;
            else if (id >= 0) {
                if (m->n_out >= TM_GRAMMAR_MAX_STACKS) rc = TM_E_LIMIT;
                else if (tm_grow((void **)&m->out, &m->cap_out, m->n_out + 1, sizeof *m->out)) rc = TM_E_NOMEM;
                else m->out[m->n_out++] = id;
            }
        } else if (e->type == GE_REF) {
            int32_t ret = rest; /* a tail call (the reference ends its alternative) pushes nothing */
            if (g->el[pos + 1].type != GE_END && g->el[pos + 1].type != GE_ALT) {
                ret = node_get(m, pos + 1, rest);
                if (ret < -1) rc = ret;
                if (ret == -1) m->cut++;
                if (ret < 0) continue; /* -1: past the depth limit, this path is not followed */
            }
            for (int32_t a = g->alt_off[e->arg]; a < g->alt_off[e->arg + 1] && !rc; a++)
                rc = work_push(m, g->alt[a], ret);
        } else if (rest < 0) {
            *accept = 1;
        } else {
            rc = work_push(m, m->node[rest].pos, m->node[rest].rest);
        }
    }
    m->n_work = 0;
    if (rc) return rc;
    if (m->n_out > 1) qsort(m->out, (size_t)m->n_out, sizeof *m->out, by_id);
    int32_t k = 0;
    for (int32_t i = 0; i < m->n_out; i++)
        if (!k || m->out[i] != m->out[k - 1]) m->out[k++] = m->out[i];
    m->n_out = k;
    return TM_OK;
}

/* after: the config the code point cp leads to from config c; -1 if no top takes it, < -1 on
 * failure */
static int32_t after(tm_gmatch *m, int32_t c, uint32_t cp)
{
    int rc = TM_OK;
    for (int32_t i = 0; i < m->cfg[c].n && !rc; i++) {
        const gnode *n = &m->node[m->ids[m->cfg[c].off + i]];
        if (tm_gset_has(m->g, m->g->el[n->pos].arg, cp)) rc = work_push(m, n->pos + 1, n->rest);
    }
    if (rc) return m->n_work = 0, rc;
    if (!m->n_work) return -1;
    int accept;
    if (rc = closure(m, &accept), rc == TM_E_LIMIT) m->cut++;
    if (rc) return rc == TM_E_LIMIT ? -1 : rc; /* too many stacks: the code point is refused */
    if (!m->n_out && !accept) return -1;
    gcfg next = {.n = m->n_out, .accept = (uint8_t)accept};
    return cfg_get(m, &next, m->out);
}

/* partial: config c reading a code point whose bits so far are cp, need continuation bytes to
 * come, the next in [lo, hi]; -1 if no top's set holds a code point it can end as */
static int32_t partial(tm_gmatch *m, int32_t c, uint32_t cp, int need, unsigned lo, unsigned hi)
{
    int sh = 6 * (need - 1);
    uint32_t min = cp << (6 * need) | (lo & 0x3F) << sh, max = cp << (6 * need) | (hi & 0x3F) << sh | ((1u << sh) - 1);
    const gcfg *from = &m->cfg[c];
    int any = 0;
    for (int32_t i = 0; i < from->n && !any; i++)
        any = tm_gset_meets(m->g, m->g->el[m->node[m->ids[from->off + i]].pos].arg, min, max);
    if (!any) return -1;
    gcfg next = {.n = from->n, .cp = cp, .need = (uint8_t)need, .lo = (uint8_t)lo, .hi = (uint8_t)hi};
    /* cfg_get may move m->ids: the stack ids go through a copy */
    if (tm_grow((void **)&m->out, &m->cap_out, from->n + 1, sizeof *m->out)) return TM_E_NOMEM;
    if (from->n) memcpy(m->out, m->ids + from->off, sizeof(int32_t) * (size_t)from->n);
    return cfg_get(m, &next, m->out);
}

/* step_cfg: the config byte b leads to from config c (memoized); -1 refused, < -1 failure */
static int32_t step_cfg(tm_gmatch *m, int32_t c, unsigned b)
{
    uint64_t key = ((uint64_t)c << 8 | b) + 1;
    size_t j = 0;
    if (m->tr_cap) {
        for (j = mix(key) & (m->tr_cap - 1); m->tr_key[j]; j = (j + 1) & (m->tr_cap - 1))
            if (m->tr_key[j] == key) return m->tr_val[j];
    }
    const gcfg *f = &m->cfg[c];
    int32_t r;
    if (f->need) {
        if (b < f->lo || b > f->hi) r = -1;
        else if (f->need == 1) r = after(m, c, f->cp << 6 | (b & 0x3F));
        else r = partial(m, c, f->cp << 6 | (b & 0x3F), f->need - 1, 0x80, 0xBF);
    } else if (b < 0x80) {
        r = after(m, c, b);
    } else { /* a lead byte: RFC 3629's table */
        int need = b >= 0xC2 && b <= 0xDF ? 1 : b >= 0xE0 && b <= 0xEF ? 2 : b >= 0xF0 && b <= 0xF4 ? 3 : 0;
        unsigned lo = b == 0xE0 ? 0xA0 : b == 0xF0 ? 0x90 : 0x80, hi = b == 0xED ? 0x9F : b == 0xF4 ? 0x8F : 0xBF;
        r = need ? partial(m, c, b & (need == 1 ? 0x1F : need == 2 ? 0x0F : 0x07), need, lo, hi) : -1;
    }
    if (r < -1) return r;
    if (2 * (m->n_tr + 1) > m->tr_cap) { /* grow, then find the slot again */
        size_t cap = m->tr_cap ? 2 * m->tr_cap : 4096;
        uint64_t *k = calloc(cap, sizeof *k);
        int32_t *v = malloc(cap * sizeof *v);
        if (!k || !v) return free(k), free(v), TM_E_NOMEM;
        for (size_t i = 0; i < m->tr_cap; i++) {
            if (!m->tr_key[i]) continue;
            size_t q = mix(m->tr_key[i]) & (cap - 1);
            while (k[q]) q = (q + 1) & (cap - 1);
            k[q] = m->tr_key[i];
            v[q] = m->tr_val[i];
        }
        free(m->tr_key);
        free(m->tr_val);
        m->tr_key = k;
        m->tr_val = v;
        m->tr_cap = cap;
        for (j = mix(key) & (cap - 1); m->tr_key[j]; j = (j + 1) & (cap - 1)) {}
    }
    m->tr_key[j] = key;
    m->tr_val[j] = r;
    m->n_tr++;
    return r;
}

/* ---- tables: the start, rebuilds ---- */

static void clear_tables(tm_gmatch *m)
{
    m->n_node = m->n_cfg = 0;
    m->n_ids = 0;
    if (m->node_t.slot) memset(m->node_t.slot, 0, sizeof *m->node_t.slot * m->node_t.cap);
    if (m->cfg_t.slot) memset(m->cfg_t.slot, 0, sizeof *m->cfg_t.slot * m->cfg_t.cap);
    if (m->tr_key) memset(m->tr_key, 0, sizeof *m->tr_key * m->tr_cap);
    m->node_t.n = m->cfg_t.n = 0;
    m->n_tr = 0;
    m->tag = atomic_fetch_add(&serial, 1);
}

/* rebuild: drop the tables, keeping only the current config: the nodes its stacks reach are
 * re-interned once each, in the order of their old ids (a node's rest is older than the node, so
 * it is mapped first): O(nodes reached), whatever the stacks share. */
static int rebuild(tm_gmatch *m)
{
    int32_t n_old = m->n_node;
    uint8_t *mark = calloc((size_t)n_old + 1, 1);
    int32_t *map = malloc(sizeof(int32_t) * ((size_t)n_old + 1));
    gnode *old = NULL;
    int32_t n_keep = 0;
    int rc = !mark || !map ? TM_E_NOMEM : TM_OK;
    const gcfg *c = &m->cfg[m->cur];
    for (int32_t i = 0; i < c->n && !rc; i++) /* each stack down to a node already marked */
        for (int32_t id = m->ids[c->off + i]; id >= 0 && !mark[id]; id = m->node[id].rest) mark[id] = 1, n_keep++;
    if (!rc && !(old = malloc(sizeof *old * ((size_t)n_keep + 1)))) rc = TM_E_NOMEM;
    int32_t k = 0;
    for (int32_t id = 0; id < n_old && !rc; id++)
        if (mark[id]) map[id] = k, old[k++] = m->node[id]; /* map: old id -> index in old[] for now */
    gcfg keep = *c;
    if (!rc && tm_grow((void **)&m->out, &m->cap_out, (size_t)keep.n + 1, sizeof *m->out)) rc = TM_E_NOMEM;
    for (int32_t i = 0; i < keep.n && !rc; i++) m->out[i] = map[m->ids[keep.off + i]];
    if (!rc) clear_tables(m), m->broken = 1; /* until the current config exists again */
    int32_t *fresh = rc ? NULL : malloc(sizeof(int32_t) * ((size_t)n_keep + 1));
    if (!rc && !fresh) rc = TM_E_NOMEM;
    for (int32_t j = 0; j < n_keep && !rc; j++) { /* old[j].rest is an old id, mapped to an index < j */
        int32_t id = node_get(m, old[j].pos, old[j].rest < 0 ? -1 : fresh[map[old[j].rest]]);
        if (id < 0) rc = id < -1 ? id : TM_E_LIMIT;
        else fresh[j] = id;
    }
    for (int32_t i = 0; i < keep.n && !rc; i++) m->out[i] = fresh[m->out[i]];
    free(mark);
    free(map);
    free(old);
    free(fresh);
    if (rc) return rc;
    if (keep.n > 1) qsort(m->out, (size_t)keep.n, sizeof *m->out, by_id);
    int32_t id = cfg_get(m, &keep, m->out);
    if (id < 0) return id;
    m->cur = id;
    m->broken = 0;
    return TM_OK;
}

/* settle: between tokens, the tables rebuilt if they grew past their limits: configurations, their
 * stack ids and the memo (up to 256 transitions a configuration, ~12 bytes each) */
static int settle(tm_gmatch *m)
{
    int over = m->n_cfg > m->limit || m->n_tr > (size_t)m->limit * 64 || m->n_ids > (int64_t)m->limit * 64;
    return over ? rebuild(m) : TM_OK;
}

void tm_gmatch_free(tm_gmatch *m)
{
    if (!m) return;
    free(m->node);
    free(m->node_t.slot);
    free(m->cfg);
    free(m->ids);
    free(m->cfg_t.slot);
    free(m->tr_key);
    free(m->tr_val);
    free(m->work);
    free(m->out);
    free(m->vis);
    free(m->vis_gen);
    free(m);
}

int tm_gmatch_new(tm_gmatch **out, const tm_grammar *g, tm_err *err)
{
    *out = NULL;
    tm_gmatch *m = calloc(1, sizeof *m);
    if (!m) return tm_errf(err, TM_E_NOMEM, "grammar: out of memory");
    m->g = g;
    m->limit = TM_GMATCH_MAX_CONFIGS;
    m->tag = atomic_fetch_add(&serial, 1);
    int rc = TM_OK;
    for (int32_t a = g->alt_off[g->root]; a < g->alt_off[g->root + 1] && !rc; a++) rc = work_push(m, g->alt[a], -1);
    int accept = 0;
    if (!rc) rc = closure(m, &accept);
    gcfg start = {.n = m->n_out, .accept = (uint8_t)accept};
    int32_t id = rc ? rc : cfg_get(m, &start, m->out);
    if (id < 0) {
        tm_gmatch_free(m);
        return id == TM_E_NOMEM ? tm_errf(err, TM_E_NOMEM, "grammar: out of memory")
                                : tm_errf(err, TM_E_LIMIT, "grammar: the root's start needs more than %d stacks",
                                          TM_GRAMMAR_MAX_STACKS);
    }
    m->cur = id;
    *out = m;
    return TM_OK;
}

void tm_gmatch_set_limit(tm_gmatch *m, int32_t n) { m->limit = n > 0 ? n : 1; }

int tm_gmatch_accepting(const tm_gmatch *m) { return !m->broken && m->cfg[m->cur].accept; }

int64_t tm_gmatch_cut(const tm_gmatch *m) { return m->cut; }

int tm_gmatch_can_continue(const tm_gmatch *m) { return !m->broken && m->cfg[m->cur].n > 0; }

/* the trie's step: state is a config id */
static int step(void *ctx, void *state, unsigned char c)
{
    int32_t cur;
    memcpy(&cur, state, sizeof cur);
    int32_t r = step_cfg((tm_gmatch *)ctx, cur, c);
    if (r < -1) return r;
    if (r < 0) return 0;
    memcpy(state, &r, sizeof r);
    return 1;
}

/* walk: *cur := the config bytes s[0..n) lead to from *cur; 1, 0 (a byte refused) or a failure */
static int walk(tm_gmatch *m, int32_t *cur, const void *s, size_t n)
{
    if (m->broken) return TM_E_NOMEM;
    for (size_t i = 0; i < n; i++) {
        int r = step(m, cur, ((const unsigned char *)s)[i]);
        if (r <= 0) return r;
    }
    return 1;
}

int tm_gmatch_feed(tm_gmatch *m, const void *s, size_t n)
{
    int32_t cur = m->cur;
    int r = walk(m, &cur, s, n);
    if (r <= 0) return r;
    m->cur = cur;
    int rc = settle(m);
    return rc ? rc : 1;
}

int tm_gmatch_would_take(tm_gmatch *m, const void *s, size_t n)
{
    int32_t cur = m->cur;
    return walk(m, &cur, s, n);
}

int tm_gmatch_mask(tm_gmatch *m, tm_vocab_trie *t, float *logits)
{
    if (m->broken) return TM_E_NOMEM;
    return tm_vocab_mask(t, m->tag, &m->cur, sizeof m->cur, step, m, logits);
}

int tm_gmatch_advance(tm_gmatch *m, const tm_vocab_trie *t, int32_t id)
{
    if (m->broken) return TM_E_NOMEM;
    int r = tm_vocab_take(t, &m->cur, sizeof m->cur, step, m, id);
    if (r <= 0) return r;
    int rc = settle(m);
    return rc ? rc : 1;
}
