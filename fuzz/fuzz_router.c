/* fuzz/fuzz_router.c: the router's cache parser and its fit on arbitrary input.
 * Byte 0 picks the mode:
 *   even: the rest is a cache file's text (tm_router_parse). Checked: accepted
 *         or rejected with TM_E_FORMAT and a message, never a crash; accepted
 *         costs predict finite, non-negative times for the routes they hold,
 *         and the pick is one of them, with and without load.
 *   odd:  the rest is raw tm_router_meas records (kind, route, n bounded;
 *         times as raw doubles: NaN, inf, negative). Checked: tm_router_fit
 *         returns a status; on TM_OK every coefficient is finite and >= 0. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/router.h"

static void check_predict(const tm_router_costs *c)
{
    static const int ns[] = {1, 16, 300, 4096};
    for (int i = 0; i < 4; i++)
        for (int load = 0; load < 2; load++) {
            tm_router_pred p;
            tm_router_load ld = {.n_decoding = 3 * load, .n_queued = 2 * load, .no_lend = load};
            tm_router_predict(c, ns[i], 1 + 50 * i, &ld, &p);
            if (!(c->routes & (1u << p.pick))) abort();
            for (int r = 1; r <= 3; r++) {
                if (!(c->routes & (1u << r))) continue;
                if (!(p.ttft[r] >= 0) || !(p.tpot[r] >= 0) || !isfinite(p.own[r])) abort();
            }
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    tm_err err = {0};
    if ((data[0] & 1) == 0) {
        tm_router_key k;
        tm_router_costs c;
        int rc = tm_router_parse((const char *)data + 1, size - 1, "fuzz.json", &k, &c, &err);
        if (rc != TM_OK) {
            if (rc != TM_E_FORMAT || err.msg[0] == '\0') abort();
            return 0;
        }
        check_predict(&c);
        return 0;
    }
    size_t rec = 4 + 3 * sizeof(double), n = (size - 1) / rec;
    if (n > 256) n = 256;
    tm_router_meas *m = calloc(n ? n : 1, sizeof *m);
    if (!m) return 0;
    const uint8_t *d = data + 1;
    for (size_t i = 0; i < n; i++, d += rec) {
        m[i].kind = d[0] % 5;
        m[i].route = d[1] % 5;
        m[i].side = d[1] & 1;
        m[i].n = (d[2] | d[3] << 8) % 5000;
        m[i].B = d[2] % 10;
        memcpy(&m[i].t, d + 4, sizeof(double));
        memcpy(&m[i].ctx, d + 4 + sizeof(double), sizeof(double));
        memcpy(&m[i].t_handoff, d + 4 + 2 * sizeof(double), sizeof(double));
        m[i].t_first = m[i].t_handoff;
    }
    tm_router_costs c;
    memset(&c, 0, sizeof c);
    static const int chunks[4] = {64, 128, 256, 512};
    for (int r = 1; r <= 3; r++) {
        c.n_chunks[r] = r == 3 ? 0 : 4;
        memcpy(c.chunk_sizes[r], chunks, sizeof chunks);
    }
    if (tm_router_fit(&c, m, (int)n, &err) == TM_OK) {
        for (int r = 1; r <= 3; r++) {
            for (int j = 0; j < TM_ROUTER_NPF; j++)
                if (!(c.pf[r][j] >= 0) || !isfinite(c.pf[r][j])) abort();
            for (int j = 0; j < 2; j++)
                if (!(c.tpot[r][j] >= 0) || !isfinite(c.tpot[r][j])) abort();
            if (!isfinite(c.first[r])) abort();
        }
        for (int j = 0; j < TM_ROUTER_NSTEP; j++)
            if (!(c.step[j] >= 0) || !isfinite(c.step[j])) abort();
        if (!(c.lend_pre >= 1) || !(c.lend_dec >= 1) || !isfinite(c.lend_pre) || !isfinite(c.lend_dec)) abort();
    }
    free(m);
    return 0;
}
