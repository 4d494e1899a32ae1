/* model/moe_route.c: expert selection (see moe_route.h). */
#include <string.h>

#include "model/model.h"
#include "model/moe_route.h"

/* the largest of v[0..n) not in sel[0..k) and allowed (ok NULL: all), the lower index on ties */
static int top_next(const float *v, int n, const int *sel, int k, const unsigned char *ok)
{
    int best = -1;
    for (int i = 0; i < n; i++) {
        int taken = ok && !ok[i];
        for (int k2 = 0; k2 < k; k2++) taken |= sel[k2] == i;
        if (!taken && (best < 0 || v[i] > v[best])) best = i;
    }
    return best;
}

/* ok[E] marks the experts of the topk_group best of n_group groups by c[E] */
static void allowed_groups(const tm_moe_route *r, const float *c, unsigned char *ok)
{
    int G = r->n_group, per = r->E / G, gsel[TM_MODEL_MAX_GROUPS];
    float gs[TM_MODEL_MAX_GROUPS];
    for (int g = 0; g < G; g++) {
        int t[2] = {top_next(c + g * per, per, NULL, 0, NULL), -1};
        if (r->group_top2) t[1] = top_next(c + g * per, per, t, 1, NULL);
        gs[g] = c[g * per + t[0]] + (t[1] >= 0 ? c[g * per + t[1]] : 0.f);
    }
    memset(ok, 0, (size_t)r->E);
    for (int k = 0; k < r->topk_group; k++) {
        gsel[k] = top_next(gs, G, gsel, k, NULL);
        memset(ok + (size_t)gsel[k] * per, 1, (size_t)per);
    }
}

void tm_moe_pick(const tm_moe_route *r, const float *p, int *sel, float *w, float *choice, unsigned char *ok)
{
    const float *c = p;
    if (r->corr) {
        for (int e = 0; e < r->E; e++) choice[e] = p[e] + r->corr[e];
        c = choice;
    }
    int grouped = r->n_group > 1 && r->topk_group < r->n_group;
    if (grouped) allowed_groups(r, c, ok);
    double sum = 0;
    for (int k = 0; k < r->K; k++) {
        sel[k] = top_next(c, r->E, sel, k, grouped ? ok : NULL);
        sum += p[sel[k]];
    }
    for (int k = 0; k < r->K; k++) w[k] = (r->norm_topk ? (float)(p[sel[k]] / sum) : p[sel[k]]) * r->scale;
}
