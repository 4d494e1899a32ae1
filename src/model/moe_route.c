/* model/moe_route.c: expert selection and grouping (see moe_route.h). */
#include <string.h>

#include "model/model.h"
#include "model/moe_route.h"

#define TM_HD
#include "model/moe_route.inc"

void tm_moe_pick(const tm_moe_route *r, const float *p, int *sel, float *w, float *choice, unsigned char *ok)
{
    moe_pick(r, p, sel, w, choice, ok);
}

void tm_moe_group(const int *sel, const float *w, int M, int K, int E, int *start, int *order, float *weight, int *slot)
{
    memset(start, 0, sizeof(int) * (size_t)(E + 1));
    for (int i = 0; i < M * K; i++) start[sel[i] + 1]++;
    for (int e = 0; e < E; e++) start[e + 1] += start[e];
    for (int i = 0; i < M * K; i++) { /* a counting sort: rows stay ascending within an expert */
        int s = start[sel[i]]++;
        order[s] = i / K;
        if (weight) weight[s] = w[i];
        if (slot) slot[i] = s;
    }
    for (int e = E; e > 0; e--) start[e] = start[e - 1]; /* undo the bumps */
    start[0] = 0;
}
