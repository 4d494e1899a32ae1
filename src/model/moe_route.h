/* model/moe_route.h: the experts a row of a mixture-of-experts layer goes to, and their weights (model.h's
 * "moe" line), one implementation for the reference and the CPU engines. The engine computes the row's
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

#endif
