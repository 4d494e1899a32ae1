/* model/moe_route.h: the experts a row of a mixture-of-experts layer goes to, and their weights (model.h's
 * "moe" line), one implementation for the reference and the CPU engines (moe_route.inc; the CUDA engine's
 * warp-a-row pick keeps the same rule and compiles its group mask from it). The engine computes the row's
 * scores p[E] (the router's softmax, or DeepSeek-V3's sigmoid); then
 *
 *   choice = p + corr                          (corr: V3's e_score_correction_bias, else 0)
 *   groups (n_group > 1, topk_group < n_group): only the experts of the topk_group best of n_group equal
 *          groups stay, a group scored by its 2 best choices summed (group_top2) or by its best
 *   sel[K] = the K best choices (the larger first, the lower index on ties)
 *   w[k]   = p[sel[k]] (over their sum where norm_topk) x scale
 *
 *   tm_moe_route rt = {E, K, 1, 1, 0, 1, 1.0f, NULL};   // plain top-k, renormalised
 *   tm_moe_pick(&rt, p, sel, w, choice, ok);       // choice[E], ok[E]: scratch */
#ifndef TM_MODEL_MOE_ROUTE_H
#define TM_MODEL_MOE_ROUTE_H

typedef struct tm_moe_route {
    int E, K;                              /* experts, top_k */
    int n_group, topk_group, group_top2;   /* DeepSeek's groups (1, 1: none) */
    int norm_topk;
    float scale;                           /* routed_scaling_factor, else 1 */
    const float *corr;                     /* [E] the choice's bias, or NULL */
} tm_moe_route;

void tm_moe_pick(const tm_moe_route *r, const float *p, int *sel, float *w, float *choice, unsigned char *ok);

/* tm_moe_group: M rows' choices sel[M][K] (weights w[M][K]) grouped by expert, a counting sort: expert e's
 * slots are [start[e], start[e + 1]) of start[E + 1], slot s holds row order[s] (rows ascending within an
 * expert) and weight[s] (weight NULL: not written); slot[M K], where not NULL, the slot of choice i */
void tm_moe_group(const int *sel, const float *w, int M, int K, int E, int *start, int *order, float *weight, int *slot);

#endif
