/* tests/test_moe_route.c: model/moe_route.h, the experts a row of a mixture-of-experts layer goes to
 * (tm_moe_pick) and the grouping of a call's rows by expert (tm_moe_group), against a second, plain
 * implementation written from the rules in moe_route.h:
 *   - pick: scores on a coarse grid (exact ties), with and without the choice's bias (DeepSeek-V3), groups
 *     scored by their best or their two best (DeepSeek's topk_group of n_group), renormalised or not, scaled;
 *     the reference sorts the allowed experts by (choice descending, index ascending) and takes the first K;
 *   - group: random choices of M rows x K distinct experts; start is the prefix sum of the counts, rows ascend
 *     within an expert, each slot is used once, slot[i] points back at choice i's row in its expert's range,
 *     the weights follow. (The CUDA engine's grouped path reads slot; the CPU engines do not: this is its CI test.) */
#include "harness.h"

#include "model/model.h"
#include "model/moe_route.h"

static const float *g_key;

/* by key descending, then index ascending: moe_route.h's "the larger first, the lower index on ties" */
static int by_key(const void *a, const void *b)
{
    int i = *(const int *)a, j = *(const int *)b;
    if (g_key[i] != g_key[j]) return g_key[i] > g_key[j] ? -1 : 1;
    return i < j ? -1 : 1;
}

/* the reference pick: sel[K], w[K] */
static void ref_pick(const tm_moe_route *r, const float *p, int *sel, float *w)
{
    int E = r->E, idx[512], allowed[512];
    float c[512], gs[64];
    for (int e = 0; e < E; e++) c[e] = p[e] + (r->corr ? r->corr[e] : 0.f), allowed[e] = 1;
    if (r->n_group > 1 && r->topk_group < r->n_group) {
        int G = r->n_group, per = E / G, gi[64];
        for (int g = 0; g < G; g++) { /* a group's score: its best choice, or its two best summed */
            for (int k = 0; k < per; k++) idx[k] = g * per + k;
            g_key = c;
            qsort(idx, (size_t)per, sizeof(int), by_key);
            gs[g] = c[idx[0]] + (r->group_top2 ? c[idx[1]] : 0.f);
            gi[g] = g;
        }
        g_key = gs;
        qsort(gi, (size_t)G, sizeof(int), by_key);
        for (int e = 0; e < E; e++) allowed[e] = 0;
        for (int k = 0; k < r->topk_group; k++)
            for (int e = 0; e < per; e++) allowed[gi[k] * per + e] = 1;
    }
    int n = 0;
    for (int e = 0; e < E; e++)
        if (allowed[e]) idx[n++] = e;
    g_key = c;
    qsort(idx, (size_t)n, sizeof(int), by_key);
    double sum = 0;
    for (int k = 0; k < r->K; k++) sel[k] = idx[k], sum += p[idx[k]];
    for (int k = 0; k < r->K; k++) w[k] = (r->norm_topk ? (float)(p[sel[k]] / sum) : p[sel[k]]) * r->scale;
}

static void pick_cases(void)
{
    struct { int E, K, n_group, topk_group, top2, norm, corr; float scale; } cs[] = {
        {8, 2, 1, 1, 0, 1, 0, 1.f},  {128, 8, 1, 1, 0, 0, 0, 1.f},  {64, 6, 8, 3, 1, 1, 1, 2.5f},
        {256, 8, 8, 4, 1, 1, 1, 2.5f}, {160, 4, 4, 2, 0, 1, 0, 1.f}, {512, 32, 1, 1, 0, 1, 1, 1.f},
    };
    int rows = 0, bad_sel = 0;
    double wmax = 0;
    unsigned seed = 12345;
    for (size_t ci = 0; ci < sizeof cs / sizeof cs[0]; ci++) {
        int E = cs[ci].E, K = cs[ci].K;
        float p[512], corr[512], choice[512], w[32], rw[32];
        int sel[32], rs[32];
        unsigned char ok[512];
        for (int e = 0; e < E; e++) corr[e] = 0.125f * (float)(e % 3);
        tm_moe_route r = {E, K, cs[ci].n_group, cs[ci].topk_group, cs[ci].top2, cs[ci].norm, cs[ci].scale,
                          cs[ci].corr ? corr : NULL};
        for (int t = 0; t < 50; t++, rows++) {
            for (int e = 0; e < E; e++) { /* a coarse grid: many exact ties */
                seed = seed * 1103515245u + 12345u;
                p[e] = 0.0625f * (float)((seed >> 16) % 9);
            }
            tm_moe_pick(&r, p, sel, w, choice, ok);
            ref_pick(&r, p, rs, rw);
            for (int k = 0; k < K; k++) {
                bad_sel += sel[k] != rs[k];
                wmax = fmax(wmax, fabs(w[k] - rw[k]));
            }
        }
    }
    printf("tm_moe_pick: %d rows of 6 routings (ties, the choice's bias, groups by best / two best): %d choices differ "
           "from the reference, weights within %.2g\n", rows, bad_sel, wmax);
    CHECK_EQ_INT(bad_sel, 0);
    CHECK(wmax == 0);
}

static void group_cases(void)
{
    int Ms[] = {1, 7, 512}, Ks[] = {1, 2, 8}, Es[] = {8, 128};
    unsigned seed = 777;
    for (size_t a = 0; a < 3; a++)
        for (size_t b = 0; b < 3; b++)
            for (size_t c = 0; c < 2; c++) {
                int M = Ms[a], K = Ks[b], E = Es[c], P = M * K, ok = 1;
                int *sel = malloc(sizeof(int) * P), *start = malloc(sizeof(int) * (E + 1)), *order = malloc(sizeof(int) * P);
                int *slot = malloc(sizeof(int) * P), *used = calloc((size_t)P, sizeof(int));
                float *w = malloc(sizeof(float) * P), *weight = malloc(sizeof(float) * P);
                for (int t = 0; t < M; t++)
                    for (int k = 0; k < K; k++) { /* K distinct experts a row */
                        int e, dup;
                        do {
                            seed = seed * 1103515245u + 12345u;
                            e = (int)((seed >> 16) % (unsigned)E), dup = 0;
                            for (int j = 0; j < k; j++) dup |= sel[t * K + j] == e;
                        } while (dup);
                        sel[t * K + k] = e, w[t * K + k] = (float)(t * K + k);
                    }
                tm_moe_group(sel, w, M, K, E, start, order, weight, slot);
                ok &= start[0] == 0 && start[E] == P;
                for (int e = 0; e < E; e++) {
                    int n = 0;
                    for (int i = 0; i < P; i++) n += sel[i] == e;
                    ok &= start[e + 1] - start[e] == n;
                    for (int s = start[e] + 1; s < start[e + 1]; s++) ok &= order[s] > order[s - 1];
                }
                for (int i = 0; i < P; i++) {
                    int s = slot[i], e = sel[i];
                    ok &= s >= start[e] && s < start[e + 1] && order[s] == i / K && weight[s] == w[i];
                    used[s]++;
                }
                for (int s = 0; s < P; s++) ok &= used[s] == 1;
                CHECKF(ok, "tm_moe_group: %d rows x %d of %d experts", M, K, E);
                void *f[] = {sel, start, order, slot, used, w, weight};
                for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) free(f[i]);
            }
}

int main(void)
{
    pick_cases();
    group_cases();
    return th_done("test_moe_route");
}
