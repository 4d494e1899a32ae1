/* model/bind.c: tm_model_bind, binding a tensor source (a HF directory, a package) to a description's
 * tensor specs, with shape and dtype checks; and the checkpoint layouts changed on the way (GPT-2's
 * Conv1D, interleaved RoPE pairs, CodeGen's qkv, StableLM's per-head norms, 3-D experts), into copies
 * or views the model owns. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "model/arch-impl.h"
#include "quant/quant.h"

/* ---- checks and owned copies ---- */

static int shape_eq(const tm_tensor *t, const tm_tensor_spec *s)
{
    if (t->ndim != s->ndim) return 0;
    for (int d = 0; d < s->ndim; d++)
        if (t->shape[d] != s->shape[d]) return 0;
    return 1;
}

static void shape_str(char *buf, size_t n, int ndim, const int64_t *shape)
{
    size_t k = 0;
    k += (size_t)snprintf(buf + k, n - k, "[");
    for (int d = 0; d < ndim && k < n; d++) k += (size_t)snprintf(buf + k, n - k, d ? ", %lld" : "%lld", (long long)shape[d]);
    if (k < n) snprintf(buf + k, n - k, "]");
}

static int check_tensor(const tm_model *m, const tm_tensor_spec *s, const tm_tensor *t, tm_err *err)
{
    if (!shape_eq(t, s)) {
        char a[96], b[96];
        shape_str(a, sizeof a, t->ndim, t->shape);
        shape_str(b, sizeof b, s->ndim, s->shape);
        return tm_errf(err, TM_E_INVALID, "tensor '%s': shape %s does not match %s expected from the config", s->name, a, b);
    }
    int64_t numel = tm_tensor_numel(t);
    size_t es = tm_dtype_size(t->dtype);
    if (t->dtype == TM_DT_F32 || t->dtype == TM_DT_F16 || t->dtype == TM_DT_BF16) {
        if (t->nbytes != (size_t)numel * es || !t->data)
            return tm_errf(err, TM_E_INVALID, "tensor '%s': %zu bytes for %lld %s elements", s->name, t->nbytes,
                           (long long)numel, tm_dtype_name(t->dtype));
        if (m->check_dtype && m->has_dtype && t->dtype != m->dtype && !s->any_float)
            return tm_errf(err, TM_E_INVALID, "tensor '%s': dtype %s does not match the config's declared dtype %s",
                           s->name, tm_dtype_name(t->dtype), tm_dtype_name(m->dtype));
        return TM_OK;
    }
    int quant = tm_quant_is_quantized(t->dtype);
    if (!quant || s->kind == TM_TK_VECTOR)
        return tm_errf(err, TM_E_UNSUPPORTED, "tensor '%s': dtype %s is not accepted here", s->name, tm_dtype_name(t->dtype));
    int64_t N = s->shape[0], K = s->shape[1];
    int64_t G = tm_quant_group_size(t->dtype, K);
    size_t want = tm_quant_data_bytes(t->dtype, N, K);
    if ((t->dtype != TM_DT_Q8PC && K % 32) || K % G || !t->data || !t->scales || t->nbytes != want)
        return tm_errf(err, TM_E_INVALID, "tensor '%s': malformed %s encoding (%zu bytes for [%lld, %lld])", s->name,
                       tm_dtype_name(t->dtype), t->nbytes, (long long)N, (long long)K);
    return TM_OK;
}

/* A plain-dtype copy of t's bytes that m owns (freed with m), for a layout the binder changes; NULL
 * (error set) if t is not plain or memory runs out. */
/* nbytes that m owns (freed with it), for tensor name's copy; once: each of its bytes is read by one
 * spec (tm_model_release may drop them once converted). An anonymous mapping of its own, so that
 * dropping its pages touches nothing else. */
static uint8_t *owned_alloc(tm_model *m, const char *name, size_t nbytes, int once, tm_err *err)
{
    struct tm_owned *no = realloc(m->owned, (size_t)(m->n_owned + 1) * sizeof *no);
    if (no) m->owned = no;
    void *d = no ? mmap(NULL, nbytes ? nbytes : 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
                 : MAP_FAILED;
    if (d == MAP_FAILED) {
        tm_errf(err, TM_E_NOMEM, "out of memory for a copy of '%s'", name);
        return NULL;
    }
    m->owned[m->n_owned++] = (struct tm_owned){d, nbytes, once, {0}};
    return d;
}

static uint8_t *owned_copy(tm_model *m, const tm_tensor_spec *s, const tm_tensor *t, tm_err *err)
{
    if (t->dtype != TM_DT_F32 && t->dtype != TM_DT_F16 && t->dtype != TM_DT_BF16) {
        tm_errf(err, TM_E_UNSUPPORTED, "tensor '%s': dtype %s is not accepted here", s->name, tm_dtype_name(t->dtype));
        return NULL;
    }
    return owned_alloc(m, s->name, t->nbytes, 0, err);
}

/* t [K][N] (a Conv1D weight as the checkpoint stores it) -> a copy [N][K] that m owns, in t's dtype */
static int transpose_into(tm_model *m, const tm_tensor_spec *s, tm_tensor *t, tm_err *err)
{
    uint8_t *d = owned_copy(m, s, t, err);
    if (!d) return err->code;
    int64_t N = s->shape[0], K = s->shape[1];
    size_t es = tm_dtype_size(t->dtype);
    const uint8_t *src = t->data;
    for (int64_t k = 0; k < K; k++) /* source row k: [N] */
        for (int64_t n = 0; n < N; n++) memcpy(d + ((size_t)n * K + k) * es, src + ((size_t)k * N + n) * es, es);
    t->data = d;
    t->shape[0] = N;
    t->shape[1] = K;
    return TM_OK;
}

/* a copy of t with each head's first rot = s->hf_rope_pairs rows (elements of a bias) reordered: row 2i to
 * i, row 2i + 1 to rot / 2 + i; the rest of each head's Dh rows in place */
/* the checkpoint's dim of a head whose RoPE pairs dims (2j, 2j + 1) for the bound dim i (rot: rotary dims) */
static int64_t pair_src(int64_t i, int64_t rot)
{
    return i >= rot ? i : i < rot / 2 ? 2 * i : 2 * (i - rot / 2) + 1;
}

static int rope_pairs_into(tm_model *m, const tm_tensor_spec *s, tm_tensor *t, tm_err *err)
{
    uint8_t *d = owned_copy(m, s, t, err);
    if (!d) return err->code;
    int64_t R = s->shape[0], Dh = m->Dh, rot = s->hf_rope_pairs;
    size_t row = (s->ndim == 2 ? (size_t)s->shape[1] : 1) * tm_dtype_size(t->dtype);
    const uint8_t *src = t->data;
    for (int64_t r = 0; r < R; r++) /* destination row r */
        memcpy(d + (size_t)r * row, src + (size_t)((r / Dh) * Dh + pair_src(r % Dh, rot)) * row, row);
    t->data = d;
    return TM_OK;
}

/* MLA rows into the bound layout (model.h's mla): hf_mla 1, the q projection [H*Dh][K], each head's rows
 * [nope | rope] -> [rope | nope]; 2, kv_a [kv_lora + rope][K] (or its bias), the rope rows in place; the rope
 * rows' pairs (2i, 2i + 1) de-interleaved (pair_src) where m->mla_interleave */
static int mla_rows_into(tm_model *m, const tm_tensor_spec *s, tm_tensor *t, tm_err *err)
{
    uint8_t *d = owned_copy(m, s, t, err);
    if (!d) return err->code;
    int64_t R = s->shape[0], rope = m->qk_rope, nope = m->qk_nope, il = m->mla_interleave;
    int64_t blk = s->hf_mla == 1 ? nope + rope : R; /* a q head's rows, or all of kv_a's */
    size_t row = (s->ndim == 2 ? (size_t)s->shape[1] : 1) * tm_dtype_size(t->dtype);
    const uint8_t *src = t->data;
    for (int64_t r = 0; r < R; r++) { /* destination row r: row i of block r / blk */
        int64_t i = r % blk, from;
        if (s->hf_mla == 1) from = i < rope ? nope + (il ? pair_src(i, rope) : i) : i - rope;
        else from = i < m->kv_lora ? i : m->kv_lora + (il ? pair_src(i - m->kv_lora, rope) : i - m->kv_lora);
        memcpy(d + (size_t)r * row, src + (size_t)(r - i + from) * row, row);
    }
    t->data = d;
    return TM_OK;
}

/* CodeGen's qkv_proj [3 H Dh][D] as transformers splits it: 4 blocks (its mp_num) of H Dh / 4 rows each
 * of q, then v, then k (a block holds heads b H/4 .. (b + 1) H/4 - 1 of each); bound as rows Q, K, V,
 * with q's and k's rotary pairs reordered as rope_pairs_into does */
static int codegen_qkv_into(tm_model *m, const tm_tensor_spec *s, tm_tensor *t, tm_err *err)
{
    uint8_t *d = owned_copy(m, s, t, err);
    if (!d) return err->code;
    int64_t H = m->H, Dh = m->Dh, HD = H * Dh, local = HD / 4, rot = m->rope[0].rot_dim;
    size_t row = (size_t)s->shape[1] * tm_dtype_size(t->dtype);
    const uint8_t *src = t->data;
    static const int64_t part_at[3] = {0, 2, 1}; /* q, k, v -> their place in a block: q, v, k */
    for (int64_t r = 0; r < 3 * HD; r++) {       /* destination row r: part p, head h, dim i */
        int64_t p = r / HD, h = (r % HD) / Dh, i = r % Dh, b = h / (H / 4), hl = h % (H / 4);
        int64_t from = b * 3 * local + part_at[p] * local + hl * Dh + (p < 2 ? pair_src(i, rot) : i);
        memcpy(d + (size_t)r * row, src + (size_t)from * row, row);
    }
    t->data = d;
    return TM_OK;
}

/* the decoder's name prefix when checkpoints differ: Gemma 3's multimodal ones name it either way
   round, GPT-2's on the Hub have none ("wte.weight") where transformers writes "transformer.", and a
   base model saved alone (an embedding model's checkpoint: Qwen3-Embedding's "layers.0...") has none
   where its causal LM has "model." */
static int probe_prefix(tm_model *m, const tm_tensor_source *src, tm_err *err)
{
    static const char *gemma3[] = {"language_model.model.", "model.language_model.", NULL};
    static const char *gpt2[] = {"transformer.", "", NULL};
    static const char *base[] = {"model.", "", NULL};
    const char **cands = m->arch == TM_ARCH_GEMMA3 && strcmp(m->prefix, "model.") != 0 ? gemma3
                         : m->arch == TM_ARCH_GPT2                                     ? gpt2
                         : !strcmp(m->prefix, "model.")                                ? base : NULL;
    const arch_info *ai = tm_arch_info_of(m);
    for (int i = 0; cands && cands[i]; i++) {
        char name[160];
        tm_tensor t;
        snprintf(name, sizeof name, "%s%s.weight", cands[i], tm_arch_names(ai)->embed);
        tm_err e2 = {0};
        if (src->lookup(src->ctx, name, &t, &e2) != TM_OK) continue;
        if (strcmp(m->prefix, cands[i]) != 0) {
            snprintf(m->prefix, sizeof m->prefix, "%s", cands[i]);
            return tm_arch_build_specs(m, err);
        }
        break;
    }
    return TM_OK;
}

/* slot is one of the n tensors at a (a NULL array holds none) */
static int slot_in(const tm_tensor *slot, const tm_tensor *a, int n)
{
    return a && slot >= a && slot < a + n;
}

/* the MoE layer whose experts (or router; GraniteMoE: or shared MLP) spec s fills, or -1 */
static int expert_layer(const tm_model *m, const tm_tensor_spec *s)
{
    int granite = tm_arch_info_of(m)->moe == MOE_GRANITE, E = m->n_experts;
    for (int l = 0; l < m->L; l++) {
        const tm_layer_weights *w = &m->w[l];
        if (!m->layer[l].moe) continue;
        if (s->slot == &w->router || slot_in(s->slot, w->e_gate, E) || slot_in(s->slot, w->e_up, E) ||
            slot_in(s->slot, w->e_down, E) || slot_in(s->slot, w->e_gate_b, E) || slot_in(s->slot, w->e_up_b, E) ||
            slot_in(s->slot, w->e_down_b, E) ||
            (granite && (s->slot == &w->s_gate || s->slot == &w->s_up || s->slot == &w->s_down)))
            return l;
    }
    return -1;
}

/* tensor name (under layer l) checked as a plain-dtype [d0][d1][d2] (d2 0: 2-D) */
static int fused_lookup(tm_model *m, const tm_tensor_source *src, int l, const char *rel, int64_t d0, int64_t d1,
                        int64_t d2, tm_tensor *t, tm_err *err)
{
    const arch_info *ai = tm_arch_info_of(m);
    tm_tensor_spec want = {.ndim = d2 ? 3 : 2, .shape = {d0, d1, d2}, .kind = TM_TK_MATRIX};
    snprintf(want.name, sizeof want.name, "%s%s.%d.%s", m->prefix, tm_arch_names(ai)->layers, l, rel);
    int rc = src->lookup(src->ctx, want.name, t, err);
    if (rc) return rc;
    if (t->dtype != TM_DT_F32 && t->dtype != TM_DT_F16 && t->dtype != TM_DT_BF16)
        return tm_errf(err, TM_E_UNSUPPORTED, "tensor '%s': dtype %s is not accepted here", want.name,
                       tm_dtype_name(t->dtype));
    return check_tensor(m, &want, t, err);
}

/* rows [r0, r0 + n) of the 2-D slice k of t ([..][R][K]) as a [n][K] tensor (a view) */
static tm_tensor rows_view(const tm_tensor *t, int64_t k, int64_t R, int64_t r0, int64_t n, int64_t K)
{
    size_t es = tm_dtype_size(t->dtype);
    tm_tensor v = {t->name, t->dtype, 2, {n, K}, (const uint8_t *)t->data + ((size_t)(k * R + r0) * (size_t)K) * es,
                   (size_t)(n * K) * es, NULL};
    return v;
}

/* An expert copy's writing (struct tm_fill), now or when a converter reaches it:
 *   1: the source [E][A][B] (x·W, [in][out]) transposed to [E][B][A] ([out][in]) (R = A, K = B here);
 *   2: MXFP4 blocks [E][R][K/32][16] and scales [E][R][K/32] dequantized to bf16 [E][R][K];
 * il: the destination's rows come in (gate, up) pairs in the source, 2b and 2b + 1, put as rows b and
 * (rows) / 2 + b. */
static void run_fill(struct tm_owned *o)
{
    static const float e2m1[16] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6, -0.0f, -0.5f, -1, -1.5f, -2, -3, -4, -6};
    struct tm_fill *f = &o->fill;
    int64_t E = f->E;
    if (f->kind == 1) {
        int64_t A = f->R, B = f->K;
        size_t es = f->es;
        uint8_t *d = o->p;
        const uint8_t *src = f->a;
        for (int64_t e = 0; e < E; e++)
            for (int64_t b = 0; b < B; b++) { /* destination row b of expert e */
                int64_t c = !f->il ? b : b < B / 2 ? 2 * b : 2 * (b - B / 2) + 1;
                for (int64_t a = 0; a < A; a++)
                    memcpy(d + ((size_t)(e * B + b) * A + a) * es, src + ((size_t)(e * A + a) * B + c) * es, es);
            }
    } else if (f->kind == 2) {
        int64_t R = f->R, K = f->K, G = K / 32;
        uint16_t *d = o->p;
        const uint8_t *bp = f->a, *sp = f->b;
        for (int64_t e = 0; e < E; e++)
            for (int64_t r = 0; r < R; r++) { /* destination row r of expert e */
                int64_t c = !f->il ? r : r < R / 2 ? 2 * r : 2 * (r - R / 2) + 1;
                const uint8_t *row = bp + (size_t)(e * R + c) * (size_t)G * 16, *srow = sp + (size_t)(e * R + c) * (size_t)G;
                uint16_t *out = d + (size_t)(e * R + r) * (size_t)K;
                for (int64_t g = 0; g < G; g++) {
                    int x = (int)srow[g] - 127;
                    for (int i = 0; i < 16; i++) {
                        uint8_t v = row[g * 16 + i];
                        out[g * 32 + 2 * i] = tm_f32_to_bf16(ldexpf(e2m1[v & 15], x));
                        out[g * 32 + 2 * i + 1] = tm_f32_to_bf16(ldexpf(e2m1[v >> 4], x));
                    }
                }
            }
    }
    f->kind = 0;
}

/* t [E][A][B] (each expert's matrix stored as x·W, [in][out]) -> a copy m owns, [E][B][A] (the bound [out][in]),
 * in t's dtype; il: B's elements come in (gate, up) pairs, 2b and 2b + 1, put as rows b and B/2 + b. A bias
 * [E][B] is the case A = 1. */
static int expert_copy(tm_model *m, tm_tensor *t, int64_t E, int64_t A, int64_t B, int il, tm_err *err)
{
    if (t->dtype != TM_DT_F32 && t->dtype != TM_DT_F16 && t->dtype != TM_DT_BF16)
        return tm_errf(err, TM_E_UNSUPPORTED, "tensor '%s': dtype %s is not accepted here", t->name ? t->name : "?",
                       tm_dtype_name(t->dtype));
    uint8_t *d = owned_alloc(m, t->name ? t->name : "?", t->nbytes, 1, err);
    if (!d) return err->code;
    struct tm_owned *o = &m->owned[m->n_owned - 1];
    o->fill = (struct tm_fill){1, t->data, NULL, E, A, B, il, tm_dtype_size(t->dtype)};
    if (!m->lazy_copies) run_fill(o);
    t->data = d;
    return TM_OK;
}

/* MXFP4, as the Hub's GPT-OSS checkpoints store the experts (transformers' convert_moe_packed_tensors reads
 * them): <rel>_blocks u8 [E][R][K/32][16], 32 e2m1 values a group, two a byte, the low nibble first;
 * <rel>_scales u8 [E][R][K/32], each group's power of two biased by 127. Row r of expert e holds [K] of the
 * matrix in [out][in] form (the bf16 checkpoint's x·W layout transposed). Dequantized (exactly: a 4-bit value
 * times a power of two) into a bf16 copy m owns, t := [E][R][K], the bound layout; il: rows come in (gate,
 * up) pairs, 2b and 2b + 1, put as rows b and R/2 + b. TM_E_NOTFOUND (err untouched) where the checkpoint
 * has no such blocks. */
static int mxfp4_experts(tm_model *m, const tm_tensor_source *src, int l, const char *rel, int64_t E, int64_t R,
                         int64_t K, int il, tm_tensor *t, tm_err *err)
{
    const char *layers = tm_arch_names(tm_arch_info_of(m))->layers;
    char bn[160], sn[160];
    snprintf(bn, sizeof bn, "%s%s.%d.%s_blocks", m->prefix, layers, l, rel);
    snprintf(sn, sizeof sn, "%s%s.%d.%s_scales", m->prefix, layers, l, rel);
    tm_tensor b, sc;
    if (src->lookup(src->ctx, bn, &b, NULL) != TM_OK) return TM_E_NOTFOUND;
    int64_t G = K / 32;
    if (K % 32 || (il && R % 2))
        return tm_errf(err, TM_E_INVALID, "tensor '%s': MXFP4 needs the input dim (%lld) a multiple of 32", bn,
                       (long long)K);
    if (b.dtype != TM_DT_U8 || b.ndim != 4 || b.shape[0] != E || b.shape[1] != R || b.shape[2] != G ||
        b.shape[3] != 16 || b.nbytes != (size_t)(E * R * G * 16) || !b.data)
        return tm_errf(err, TM_E_INVALID, "tensor '%s': MXFP4 blocks must be u8 [%lld][%lld][%lld][16] from the config",
                       bn, (long long)E, (long long)R, (long long)G);
    tm_err e2 = {0};
    if (src->lookup(src->ctx, sn, &sc, &e2) != TM_OK)
        return tm_errf(err, TM_E_INVALID, "tensor '%s': MXFP4 blocks without their scales: %s", bn, e2.msg);
    if (sc.dtype != TM_DT_U8 || sc.ndim != 3 || sc.shape[0] != E || sc.shape[1] != R || sc.shape[2] != G ||
        sc.nbytes != (size_t)(E * R * G) || !sc.data)
        return tm_errf(err, TM_E_INVALID, "tensor '%s': MXFP4 scales must be u8 [%lld][%lld][%lld] from the config",
                       sn, (long long)E, (long long)R, (long long)G);
    uint16_t *d = (uint16_t *)owned_alloc(m, bn, (size_t)(E * R * K) * 2, 1, err);
    if (!d) return err->code;
    struct tm_owned *o = &m->owned[m->n_owned - 1];
    o->fill = (struct tm_fill){2, b.data, sc.data, E, R, K, il, 2};
    if (!m->lazy_copies) run_fill(o);
    *t = (tm_tensor){b.name, TM_DT_BF16, 3, {E, R, K}, d, (size_t)(E * R * K) * 2, NULL};
    return TM_OK;
}

/* GPT-OSS's experts as transformers saves them: <layer>.mlp.experts.gate_up_proj [E][D][2Fe] (x·W, gate and
 * up in alternate columns), gate_up_proj_bias [E][2Fe] (alternate too), down_proj [E][Fe][D], down_proj_bias
 * [E][D]: copied into the bound layout, gate_up [E][2Fe][D] (gate rows, then up rows) and down [E][D][Fe], then
 * viewed per expert. The Hub's MXFP4 checkpoints (gate_up_proj_blocks / _scales, down_proj_blocks / _scales)
 * are dequantized into the same layout (mxfp4_experts). */
static int bind_oai_experts(tm_model *m, const tm_tensor_source *src, int l, tm_err *err)
{
    tm_layer_weights *w = &m->w[l];
    int64_t E = m->n_experts, F = m->F_expert, D = m->D;
    tm_tensor gu, gub, dn, dnb;
    tm_err e2 = {0};
    /* bf16 [E][D][2Fe] (x·W), else MXFP4 [E][2Fe][D] dequantized into the bound layout */
    int rc = fused_lookup(m, src, l, "mlp.experts.gate_up_proj", E, D, 2 * F, &gu, err), mx_gu = 0, mx_dn = 0;
    if (rc == TM_E_NOTFOUND && (mx_gu = mxfp4_experts(m, src, l, "mlp.experts.gate_up_proj", E, 2 * F, D, 1, &gu, &e2)) !=
                                   TM_E_NOTFOUND) {
        rc = mx_gu;
        mx_gu = rc == TM_OK;
        if (rc) *err = e2;
    }
    if (rc || (rc = fused_lookup(m, src, l, "mlp.experts.gate_up_proj_bias", E, 2 * F, 0, &gub, err))) return rc;
    rc = fused_lookup(m, src, l, "mlp.experts.down_proj", E, F, D, &dn, err);
    if (rc == TM_E_NOTFOUND && (mx_dn = mxfp4_experts(m, src, l, "mlp.experts.down_proj", E, D, F, 0, &dn, &e2)) !=
                                   TM_E_NOTFOUND) {
        rc = mx_dn;
        mx_dn = rc == TM_OK;
        if (rc) *err = e2;
    }
    if (rc || (rc = fused_lookup(m, src, l, "mlp.experts.down_proj_bias", E, D, 0, &dnb, err))) return rc;
    if ((!mx_gu && (rc = expert_copy(m, &gu, E, D, 2 * F, 1, err))) || (rc = expert_copy(m, &gub, E, 1, 2 * F, 1, err)) ||
        (!mx_dn && (rc = expert_copy(m, &dn, E, F, D, 0, err))))
        return rc;
    for (int64_t e = 0; e < E; e++) {
        w->e_gate[e] = rows_view(&gu, e, 2 * F, 0, F, D);
        w->e_up[e] = rows_view(&gu, e, 2 * F, F, F, D);
        w->e_down[e] = rows_view(&dn, e, D, 0, D, F);
        w->e_gate_b[e] = rows_view(&gub, e, 2 * F, 0, F, 1);
        w->e_up_b[e] = rows_view(&gub, e, 2 * F, F, F, 1);
        w->e_down_b[e] = rows_view(&dnb, e, 1, 0, 1, D);
        w->e_gate_b[e].ndim = w->e_up_b[e].ndim = w->e_down_b[e].ndim = 1; /* vectors [F], [F], [D] */
        w->e_gate_b[e].shape[0] = w->e_up_b[e].shape[0] = F;
        w->e_down_b[e].shape[0] = D;
    }
    return TM_OK;
}

/* Experts stored as 3-D tensors, bound as per-expert views (no copy; a package stores them per expert under
 * the names of build_specs, so it is the same either way):
 *   transformers 5's save_pretrained: <layer>.mlp.experts.gate_up_proj [E][2Fe][D] (each expert's gate rows,
 *     then its up rows) and <layer>.mlp.experts.down_proj [E][D][Fe], Mixtral's router as <layer>.mlp.gate;
 *   GraniteMoE's checkpoints: <layer>.block_sparse_moe.input_linear.weight [E][2Fe][D] and output_linear
 *     [E][D][Fe], and its shared MLP's shared_mlp.input_linear.weight [2Fs][D] and output_linear [D][Fs];
 *   GPT-OSS's: bind_oai_experts. */
static int bind_fused_experts(tm_model *m, const tm_tensor_source *src, int l, tm_err *err)
{
    const arch_info *ai = tm_arch_info_of(m);
    tm_layer_weights *w = &m->w[l];
    int64_t E = m->n_experts, F = m->F_expert, D = m->D, Fs = m->F_shared;
    int granite = ai->moe == MOE_GRANITE;
    tm_tensor gu, dn, t;
    int rc;
    if (ai->moe == MOE_GPT_OSS) return bind_oai_experts(m, src, l, err);
    if ((rc = fused_lookup(m, src, l, granite ? "block_sparse_moe.input_linear.weight" : "mlp.experts.gate_up_proj", E,
                           2 * F, D, &gu, err)) ||
        (rc = fused_lookup(m, src, l, granite ? "block_sparse_moe.output_linear.weight" : "mlp.experts.down_proj", E, D,
                           F, &dn, err)))
        return rc;
    if (ai->moe == MOE_MIXTRAL) {
        if ((rc = fused_lookup(m, src, l, "mlp.gate.weight", E, D, 0, &t, err))) return rc;
        w->router = t;
    }
    for (int64_t e = 0; e < E; e++) {
        w->e_gate[e] = rows_view(&gu, e, 2 * F, 0, F, D);
        w->e_up[e] = rows_view(&gu, e, 2 * F, F, F, D);
        w->e_down[e] = rows_view(&dn, e, D, 0, D, F);
    }
    if (granite && Fs) {
        if ((rc = fused_lookup(m, src, l, "shared_mlp.input_linear.weight", 2 * Fs, D, 0, &gu, err)) ||
            (rc = fused_lookup(m, src, l, "shared_mlp.output_linear.weight", D, Fs, 0, &w->s_down, err)))
            return rc;
        w->s_gate = rows_view(&gu, 0, 2 * Fs, 0, Fs, D);
        w->s_up = rows_view(&gu, 0, 2 * Fs, Fs, Fs, D);
    }
    return TM_OK;
}

/* StableLM's q/k LayerNorms are one module per head in a checkpoint (<attn>.q_layernorm.norms.<h>.weight, each
 * [Dh]): gathered into the [heads][Dh] tensor of spec s, a copy m owns */
static int gather_head_norms(tm_model *m, const tm_tensor_source *src, const tm_tensor_spec *s, tm_tensor *out,
                             tm_err *err)
{
    int64_t nh = s->shape[0], Dh = s->shape[1];
    int base = (int)(strlen(s->name) - strlen(".weight"));
    uint8_t *d = NULL;
    for (int64_t h = 0; h < nh; h++) {
        tm_tensor t;
        tm_tensor_spec one = {.ndim = 1, .shape = {Dh}, .kind = TM_TK_VECTOR};
        snprintf(one.name, sizeof one.name, "%.*s.norms.%lld.weight", base, s->name, (long long)h);
        int rc = src->lookup(src->ctx, one.name, &t, err);
        if (rc || (rc = check_tensor(m, &one, &t, err))) return rc;
        if (h == 0) {
            *out = (tm_tensor){s->name, t.dtype, 2, {nh, Dh}, NULL, t.nbytes * (size_t)nh, NULL};
            if (!(d = owned_copy(m, s, out, err))) return err->code;
            out->data = d;
        } else if (t.dtype != out->dtype) {
            return tm_errf(err, TM_E_INVALID, "tensor '%s': dtype %s differs from head 0's", one.name,
                           tm_dtype_name(t.dtype));
        }
        memcpy(d + (size_t)h * t.nbytes, t.data, t.nbytes);
    }
    return TM_OK;
}

/* the copy p points into, or NULL */
static const struct tm_owned *owner_of(const tm_model *m, const void *p)
{
    for (int i = 0; i < m->n_owned; i++) {
        const uint8_t *b = m->owned[i].p;
        if ((const uint8_t *)p >= b && (const uint8_t *)p < b + (m->owned[i].n ? m->owned[i].n : 1)) return &m->owned[i];
    }
    return NULL;
}

void tm_model_fill(const tm_model *m, const void *p)
{
    const struct tm_owned *o = owner_of(m, p);
    if (o && o->fill.kind) run_fill((struct tm_owned *)o); /* (m's copies are its own, const or not) */
}

void tm_model_release(const tm_model *m, const void *p, size_t n)
{
    uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE), a = (uintptr_t)p, e = (uintptr_t)p + n;
    const struct tm_owned *o = owner_of(m, p);
    if (o && !o->once) return;
    if (o) a = (a + pg - 1) & ~(pg - 1), e &= ~(pg - 1); /* the whole pages inside: the neighbours are not done */
    else a &= ~(pg - 1), e = (e + pg - 1) & ~(pg - 1);  /* a file's pages: read again if touched */
    if (e > a) madvise((void *)a, e - a, MADV_DONTNEED);
}


int tm_model_bind(tm_model *m, const tm_tensor_source *src, tm_err *err)
{
    int rc;
    tm_tensor t;
    if ((rc = probe_prefix(m, src, err))) return rc;
    int fused_l = -1; /* the last layer bound from fused experts: its other expert specs are skipped */
    for (int i = 0; i < m->n_spec; i++) {
        const tm_tensor_spec *s = &m->spec[i];
        int el = m->n_experts ? expert_layer(m, s) : -1;
        if (el >= 0 && el == fused_l) continue; /* (the router precedes the experts: bound already, or fused) */
        rc = src->lookup(src->ctx, s->name, &t, err);
        if (rc == TM_E_NOTFOUND && el >= 0 && !src->canonical &&
            (s->slot != &m->w[el].router || tm_arch_info_of(m)->moe == MOE_MIXTRAL)) {
            tm_err e2 = {0};
            if (bind_fused_experts(m, src, el, &e2) == TM_OK) {
                fused_l = el;
                continue;
            }
            if (e2.code != TM_E_NOTFOUND) { /* fused tensors there, but wrong: that is the error to report */
                *err = e2;
                return e2.code;
            }
        }
        if (rc == TM_E_NOTFOUND && !src->canonical && m->arch == TM_ARCH_STABLELM && m->qk_norm_heads && s->ndim == 2 &&
            s->kind == TM_TK_VECTOR) { /* a q/k LayerNorm as one module per head */
            tm_err e2 = {0};
            if ((rc = gather_head_norms(m, src, s, &t, &e2)) && e2.code != TM_E_NOTFOUND) {
                *err = e2;
                return rc;
            }
            if (rc) rc = TM_E_NOTFOUND; /* neither form: the spec's name is the one to report */
        }
        if (rc == TM_E_NOTFOUND && s->slot == &m->lm_head) {
            /* no output head: a base model's checkpoint. Bound as tied (the engines need a head); the
               runtime refuses to generate with it (rt_model.h: headless) */
            m->headless = m->tied = 1;
            memmove(&m->spec[i], &m->spec[i + 1], sizeof m->spec[0] * (size_t)(m->n_spec - i - 1));
            m->n_spec--;
            i--;
            continue;
        }
        if (rc) return rc;
        if (s->hf_lead1 && !src->canonical && t.ndim == 2 && t.shape[0] == 1) { /* [1][n] as the vector [n] */
            t.ndim = 1;
            t.shape[0] = t.shape[1];
            t.shape[1] = 0;
        }
        if (s->hf_rope_pairs && !src->canonical) { /* rotary pairs interleaved: checked, then reordered */
            if ((rc = check_tensor(m, s, &t, err)) || (rc = rope_pairs_into(m, s, &t, err))) return rc;
        } else if (s->hf_mla && !src->canonical) {
            if ((rc = check_tensor(m, s, &t, err)) || (rc = mla_rows_into(m, s, &t, err))) return rc;
        } else if (s->hf_codegen && !src->canonical) {
            if ((rc = check_tensor(m, s, &t, err)) || (rc = codegen_qkv_into(m, s, &t, err))) return rc;
        } else if (s->hf_transposed && !src->canonical) { /* stored [K][N]: checked so, then transposed */
            tm_tensor_spec st = *s;
            st.shape[0] = s->shape[1];
            st.shape[1] = s->shape[0];
            if ((rc = check_tensor(m, &st, &t, err)) || (rc = transpose_into(m, s, &t, err))) return rc;
        } else if ((rc = check_tensor(m, s, &t, err))) {
            return rc;
        }
        *s->slot = t;
    }
    if (m->norm_plain) { /* OLMo: every norm's weight is ones, a vector the model owns */
        float *ones = (float *)owned_alloc(m, "ones", sizeof(float) * (size_t)m->D, 0, err);
        if (!ones) return err->code;
        for (int i = 0; i < m->D; i++) ones[i] = 1.0f;
        tm_tensor one = {"ones", TM_DT_F32, 1, {m->D}, ones, sizeof(float) * (size_t)m->D, NULL};
        m->final_norm = one;
        for (int l = 0; l < m->L; l++) m->w[l].attn_norm = m->w[l].ffn_norm = one;
    }
    if (m->parallel == 1)
        for (int l = 0; l < m->L; l++) {
            m->w[l].ffn_norm = m->w[l].attn_norm;
            m->w[l].ffn_norm_b = m->w[l].attn_norm_b;
        }
    if (m->tied) {
        /* a tied model reads the embedding as its output projection, unless the
         * source holds its own "lm_head.weight" (a package's decode stage keeps a
         * copy in the decode encoding: the projection is streamed every step) */
        m->lm_head = m->embed;
        tm_tensor h;
        if (src->lookup(src->ctx, "lm_head.weight", &h, NULL) == TM_OK && h.ndim == 2 && h.shape[0] == m->V &&
            h.shape[1] == m->D)
            m->lm_head = h;
    }
    m->bound = 1;
    return TM_OK;
}
