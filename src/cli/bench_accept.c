/* cli/bench_accept.c: issue 6's acceptance points, judged from the figures
 * of one `tandem bench` run (a bench_report). Only the issue's thresholds
 * are constants; every value comes from the run:
 *
 *   1 prefill_heavy  the e-test with the largest P/G (the issue's e448+64):
 *                    hybrid's total below prefill-only's, decode-only's and
 *                    llama.cpp's (each ratio hybrid / other < 1)
 *   2 decode_heavy   the e-test with the largest G/P (the issue's e64+448):
 *                    hybrid / decode-only <= 1.03
 *   3 router         at every sweep point, auto / the fastest forced route
 *                    <= 1.05 (the issue's sweep: 16..8192), auto timed in
 *                    its own runs; also reported: the picked route's forced
 *                    run over the best (the choice alone, without auto's
 *                    own run-to-run noise)
 *   4 stall          the running streams' p50 TPOT during a new prompt's
 *                    prefill / before it < 1.25 (the issue: 4 streams), and
 *                    llama.cpp's rise measured in the same scenario
 *
 * Each point's "met": true or false from the measured figures; null when a
 * figure it needs is missing ("missing" names it) and none of the others
 * failed. "as_in_issue": whether the scenario measured is the issue's.
 * "all_met": every point met on the issue's scenarios (null: not judged). */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "cli/bench.h"

#define ACC_DECODE_HEAVY_MAX 1.03
#define ACC_ROUTER_MAX 1.05
#define ACC_STALL_MAX 1.25
#define ACC_SWEEP_LO 16
#define ACC_SWEEP_HI 8192
#define ACC_STALL_STREAMS 4

typedef struct acc_point {
    const char *key; /* the JSON member */
    char title[160]; /* what the issue asks, for the markdown and stderr */
    int met;         /* 1 met, 0 not met, -1 not judged (a figure missing) */
    int as_in_issue;
    char missing[256];                              /* comma list of what was not measured */
    char measured[256], threshold[96], behind[384]; /* markdown cells */
    FILE *j;                                        /* the point's JSON members, "k": v, ... */
    char *json;
    size_t json_len;
} acc_point;

static void cat(char *dst, size_t size, const char *fmt, ...)
{
    size_t n = strlen(dst);
    if (n + 1 >= size) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(dst + n, size - n, fmt, ap);
    va_end(ap);
}

/* one check: a missing figure leaves the point unjudged unless another failed */
static void check(acc_point *p, int have, int ok, const char *what)
{
    if (!have) {
        cat(p->missing, sizeof p->missing, "%s%s", p->missing[0] ? ", " : "", what);
        if (p->met == 1) p->met = -1;
    } else if (!ok) {
        p->met = 0;
    }
}

static void jnum(FILE *f, const char *key, double v, int have)
{
    if (have)
        fprintf(f, "\"%s\": %.6g, ", key, v);
    else
        fprintf(f, "\"%s\": null, ", key);
}

static const char *tri(int met)
{
    return met == 1 ? "true" : met == 0 ? "false" : "null";
}

static const bench_row *find_row(const bench_report *r, const char *name, int route)
{
    for (int i = 0; i < r->n_rows; i++)
        if (r->rows[i].route == route && !strcmp(r->rows[i].name, name) && r->rows[i].reps > 0) return &r->rows[i];
    return NULL;
}

/* the e-test most weighted to the prompt (prefill_heavy) or to the output */
static const bench_row *pick_test(const bench_report *r, int prefill_heavy)
{
    const bench_row *best = NULL;
    double bw = 1;
    for (int i = 0; i < r->n_rows; i++) {
        const bench_row *x = &r->rows[i];
        if (x->kind != 'e') continue;
        double w = prefill_heavy ? (double)x->P / x->G : (double)x->G / x->P;
        if (w > bw) {
            bw = w;
            best = x;
        }
    }
    return best;
}

/* ---- the four points ------------------------------------------------------------------- */

static void point_prefill_heavy(const bench_report *r, acc_point *p)
{
    const bench_row *t = pick_test(r, 1);
    snprintf(p->title, sizeof p->title, "prefill-heavy %s: hybrid beats both single-engine routes and llama.cpp",
             t ? t->name : "eP+G (P > G)");
    snprintf(p->threshold, sizeof p->threshold, "hybrid / each < 1");
    if (!t) {
        check(p, 0, 0, "an eP+G test with P > G");
        fprintf(p->j, "\"test\": null, ");
        return;
    }
    p->as_in_issue = t->P == 448 && t->G == 64;
    const bench_row *h = find_row(r, t->name, TANDEM_ROUTE_HYBRID),
                    *po = find_row(r, t->name, TANDEM_ROUTE_PREFILL_ONLY),
                    *dn = find_row(r, t->name, TANDEM_ROUTE_DECODE_ONLY), *au = find_row(r, t->name, TANDEM_ROUTE_AUTO);
    const bench_row *pe = NULL; /* the row llama.cpp ran beside, else any with its figures */
    for (int i = 0; i < r->n_rows; i++)
        if (!strcmp(r->rows[i].name, t->name) && r->rows[i].peer_reps && (!pe || r->rows[i].peer_beside))
            pe = &r->rows[i];
    double hs = h ? h->value : 0;
    check(p, h != NULL, 1, "the hybrid route");
    check(p, po != NULL, po && (!h || hs < po->value), "the prefill-only route");
    check(p, dn != NULL, dn && (!h || hs < dn->value), "the decode-only route");
    check(p, pe != NULL, pe && (!h || hs < pe->peer_value), "llama.cpp (--peer)");
    fprintf(p->j, "\"test\": \"%s\", ", t->name);
    jnum(p->j, "hybrid_s", hs, h != NULL);
    jnum(p->j, "prefill_only_s", po ? po->value : 0, po != NULL);
    jnum(p->j, "decode_only_s", dn ? dn->value : 0, dn != NULL);
    jnum(p->j, "auto_s", au ? au->value : 0, au != NULL);
    jnum(p->j, "peer_s", pe ? pe->peer_value : 0, pe != NULL);
    jnum(p->j, "hybrid_over_prefill_only", h && po ? hs / po->value : 0, h && po);
    jnum(p->j, "hybrid_over_decode_only", h && dn ? hs / dn->value : 0, h && dn);
    jnum(p->j, "hybrid_over_peer", h && pe ? hs / pe->peer_value : 0, h && pe);
    fprintf(p->j,
            "\"threshold\": 1.0, \"rule\": \"hybrid_s / each of prefill_only_s, decode_only_s, peer_s < threshold\", ");
    if (h) {
        cat(p->measured, sizeof p->measured, "hybrid %.3f s", hs);
        if (po) cat(p->measured, sizeof p->measured, "; %.3f of prefill-only", hs / po->value);
        if (dn) cat(p->measured, sizeof p->measured, "; %.3f of decode-only", hs / dn->value);
        if (pe) cat(p->measured, sizeof p->measured, "; %.3f of llama.cpp", hs / pe->peer_value);
    }
    if (po) cat(p->behind, sizeof p->behind, "prefill-only %.3f s", po->value);
    if (dn) cat(p->behind, sizeof p->behind, "%sdecode-only %.3f s", p->behind[0] ? ", " : "", dn->value);
    if (pe) cat(p->behind, sizeof p->behind, "%sllama.cpp %.3f s", p->behind[0] ? ", " : "", pe->peer_value);
    if (au) cat(p->behind, sizeof p->behind, "%sauto %.3f s", p->behind[0] ? "; " : "", au->value);
}

static void point_decode_heavy(const bench_report *r, acc_point *p)
{
    const bench_row *t = pick_test(r, 0);
    snprintf(p->title, sizeof p->title, "decode-heavy %s: hybrid within 3%% of decode-only",
             t ? t->name : "eP+G (G > P)");
    snprintf(p->threshold, sizeof p->threshold, "hybrid / decode-only <= %.2f", ACC_DECODE_HEAVY_MAX);
    if (!t) {
        check(p, 0, 0, "an eP+G test with G > P");
        fprintf(p->j, "\"test\": null, ");
        return;
    }
    p->as_in_issue = t->P == 64 && t->G == 448;
    const bench_row *h = find_row(r, t->name, TANDEM_ROUTE_HYBRID),
                    *dn = find_row(r, t->name, TANDEM_ROUTE_DECODE_ONLY),
                    *po = find_row(r, t->name, TANDEM_ROUTE_PREFILL_ONLY);
    double ratio = h && dn ? h->value / dn->value : 0;
    check(p, h != NULL, 1, "the hybrid route");
    check(p, dn != NULL, !h || ratio <= ACC_DECODE_HEAVY_MAX, "the decode-only route");
    fprintf(p->j, "\"test\": \"%s\", ", t->name);
    jnum(p->j, "hybrid_s", h ? h->value : 0, h != NULL);
    jnum(p->j, "decode_only_s", dn ? dn->value : 0, dn != NULL);
    jnum(p->j, "prefill_only_s", po ? po->value : 0, po != NULL);
    jnum(p->j, "hybrid_over_decode_only", ratio, h && dn);
    fprintf(p->j, "\"threshold\": %.2f, \"rule\": \"hybrid_s / decode_only_s <= threshold\", ", ACC_DECODE_HEAVY_MAX);
    if (h && dn) cat(p->measured, sizeof p->measured, "hybrid / decode-only %.3f", ratio);
    if (h) cat(p->behind, sizeof p->behind, "hybrid %.3f s", h->value);
    if (dn) cat(p->behind, sizeof p->behind, "%sdecode-only %.3f s", h ? ", " : "", dn->value);
}

static void point_router(const bench_report *r, acc_point *p)
{
    snprintf(p->title, sizeof p->title, "the router (auto) within 5%% of the best forced route, sweep %d..%d",
             ACC_SWEEP_LO, ACC_SWEEP_HI);
    snprintf(p->threshold, sizeof p->threshold, "auto / best <= %.2f at every point", ACC_ROUTER_MAX);
    fprintf(p->j,
            "\"threshold\": %.2f, \"rule\": \"auto_s / the fastest forced route's time <= threshold at every "
            "prompt length\", ",
            ACC_ROUTER_MAX);
    check(p, r->sweep && r->n_sweep > 0, 1, "the sweep (--sweep)");
    if (!r->sweep || r->n_sweep == 0) return;
    int lo = r->sweep[0].prompt, hi = lo, worst = 0, fastest = 0;
    double wr = 0, wc = 0; /* worst auto / best; worst (the picked route's forced run) / best */
    fprintf(p->j, "\"per_point\": [");
    for (int i = 0; i < r->n_sweep; i++) {
        const bench_sweep_point *s = &r->sweep[i];
        int b = TANDEM_ROUTE_HYBRID;
        for (int q = TANDEM_ROUTE_HYBRID; q <= TANDEM_ROUTE_DECODE_ONLY; q++)
            if (s->t[q] < s->t[b]) b = q;
        double ratio = s->t[TANDEM_ROUTE_AUTO] / s->t[b], choice = 0;
        for (int q = TANDEM_ROUTE_HYBRID; q <= TANDEM_ROUTE_DECODE_ONLY; q++)
            if (!strcmp(s->picked, bench_route_name(q))) choice = s->t[q] / s->t[b];
        if (choice > wc) wc = choice;
        check(p, 1, ratio <= ACC_ROUTER_MAX, NULL);
        if (ratio > wr) {
            wr = ratio;
            worst = i;
        }
        fastest += !strcmp(s->picked, bench_route_name(b));
        if (s->prompt < lo) lo = s->prompt;
        if (s->prompt > hi) hi = s->prompt;
        fprintf(
            p->j,
            "%s\n      {\"prompt\": %d, \"reps\": %d, \"auto_s\": %.6g, \"picked\": \"%s\", \"best_route\": \"%s\", "
            "\"best_s\": %.6g, \"ratio\": %.6g, \"picked_forced_ratio\": %.6g, \"met\": %s}",
            i ? "," : "", s->prompt, s->reps, s->t[TANDEM_ROUTE_AUTO], s->picked, bench_route_name(b), s->t[b], ratio,
            choice, ratio <= ACC_ROUTER_MAX ? "true" : "false");
    }
    p->as_in_issue = lo <= ACC_SWEEP_LO && hi >= ACC_SWEEP_HI;
    const bench_sweep_point *w = &r->sweep[worst];
    fprintf(
        p->j,
        "],\n    \"points\": %d, \"sweep_min\": %d, \"sweep_max\": %d, \"worst_ratio\": %.4f, \"worst_prompt\": %d, "
        "\"picked_the_fastest\": %d, \"worst_picked_forced_ratio\": %.4f, ",
        r->n_sweep, lo, hi, wr, w->prompt, fastest, wc);
    cat(p->measured, sizeof p->measured,
        "worst %.3f (at %d); %d points %d..%d; the fastest route picked at %d of %d (the picked route's forced "
        "run: worst %.3f of the best)",
        wr, w->prompt, r->n_sweep, lo, hi, fastest, r->n_sweep, wc);
    cat(p->behind, sizeof p->behind, "at %d: auto %.3f s (%s); hybrid %.3f, prefill-only %.3f, decode-only %.3f s",
        w->prompt, w->t[TANDEM_ROUTE_AUTO], w->picked, w->t[TANDEM_ROUTE_HYBRID], w->t[TANDEM_ROUTE_PREFILL_ONLY],
        w->t[TANDEM_ROUTE_DECODE_ONLY]);
}

static void point_stall(const bench_report *r, acc_point *p)
{
    const bench_stall_res *s = r->stall;
    snprintf(p->title, sizeof p->title,
             "%d streams, a new prompt: running streams' p50 TPOT rises < 25%%; "
             "llama.cpp's stall measured",
             s ? s->streams : ACC_STALL_STREAMS);
    snprintf(p->threshold, sizeof p->threshold, "rise < %.2f", ACC_STALL_MAX);
    fprintf(p->j,
            "\"threshold\": %.2f, \"rule\": \"tpot_p50_during / tpot_p50_quiet < threshold, and peer_rise "
            "measured\", ",
            ACC_STALL_MAX);
    check(p, s != NULL, 1, "the stall scenario (--stall)");
    if (!s) return;
    const bench_stall_side *a = &s->ours, *b = &s->peer;
    p->as_in_issue = s->streams == ACC_STALL_STREAMS;
    check(p, 1, a->ratio < ACC_STALL_MAX, NULL);
    check(p, b->reps > 0, 1, "llama.cpp's stall (--peer)");
    fprintf(p->j, "\"streams\": %d, \"prompt\": %d, \"lend\": %s, \"reps\": %d, ", s->streams, s->P,
            s->lend ? "true" : "false", a->reps);
    jnum(p->j, "tpot_p50_quiet_ms", 1e3 * a->q50, 1);
    jnum(p->j, "tpot_p50_during_ms", 1e3 * a->d50, 1);
    jnum(p->j, "rise", a->ratio, 1);
    jnum(p->j, "prefill_s", a->prefill, 1);
    jnum(p->j, "peer_tpot_p50_quiet_ms", 1e3 * b->q50, b->reps > 0);
    jnum(p->j, "peer_tpot_p50_during_ms", 1e3 * b->d50, b->reps > 0);
    jnum(p->j, "peer_rise", b->ratio, b->reps > 0);
    jnum(p->j, "peer_prefill_s", b->prefill, b->reps > 0);
    cat(p->measured, sizeof p->measured, "rise %.3f (%s)", a->ratio, s->lend_mode);
    if (b->reps) cat(p->measured, sizeof p->measured, "; llama.cpp %.2f", b->ratio);
    cat(p->behind, sizeof p->behind, "TPOT p50 %.1f -> %.1f ms, its TTFT %.2f s", 1e3 * a->q50, 1e3 * a->d50,
        a->prefill);
    if (b->reps)
        cat(p->behind, sizeof p->behind, "; llama.cpp %.1f -> %.1f ms, TTFT %.2f s", 1e3 * b->q50, 1e3 * b->d50,
            b->prefill);
}

/* ---- the report ---------------------------------------------------------------------- */

int bench_acceptance(const bench_report *r, FILE *json, FILE *md)
{
    static const char *const keys[4] = {"prefill_heavy", "decode_heavy", "router", "stall"};
    void (*const judge[4])(const bench_report *, acc_point *) = {point_prefill_heavy, point_decode_heavy, point_router,
                                                                 point_stall};
    acc_point pt[4];
    int all = 1;
    for (int i = 0; i < 4; i++) {
        pt[i] = (acc_point){.key = keys[i], .met = 1};
        pt[i].j = open_memstream(&pt[i].json, &pt[i].json_len);
        if (!pt[i].j) return -1;
        judge[i](r, &pt[i]);
        fclose(pt[i].j);
        if (pt[i].met == 0 || (pt[i].met == 1 && !pt[i].as_in_issue))
            all = 0;
        else if (pt[i].met < 0 && all == 1)
            all = -1;
    }
    if (json) {
        fprintf(json, "  \"acceptance\": {\"all_met\": %s,\n", tri(all));
        for (int i = 0; i < 4; i++)
            fprintf(json, "    \"%s\": {%s\"as_in_issue\": %s, \"missing\": \"%s\", \"met\": %s}%s\n", pt[i].key,
                    pt[i].json ? pt[i].json : "", pt[i].as_in_issue ? "true" : "false", pt[i].missing, tri(pt[i].met),
                    i < 3 ? "," : "");
        fprintf(json, "  },\n");
    }
    if (md) {
        fprintf(md, "\n### Issue 6 acceptance, judged from this run's figures\n\n"
                    "| point | measured | threshold | met | the figures behind it |\n|---|---|---|---|---|\n");
        for (int i = 0; i < 4; i++) {
            const acc_point *p = &pt[i];
            fprintf(md, "| %s%s | %s | %s | %s | %s%s%s%s |\n", p->title,
                    p->as_in_issue || !p->measured[0] ? "" : " (not the issue's scenario)", p->measured, p->threshold,
                    p->met == 1   ? "**yes**"
                    : p->met == 0 ? "**no**"
                                  : "not judged",
                    p->behind, p->missing[0] && p->behind[0] ? "; " : "", p->missing[0] ? "not measured: " : "",
                    p->missing);
        }
        fprintf(md, "\nAll four met on the issue's scenarios: %s.\n",
                all == 1   ? "**yes**"
                : all == 0 ? "**no**"
                           : "not judged");
    }
    for (int i = 0; i < 4; i++) {
        const acc_point *p = &pt[i];
        fprintf(stderr, "acceptance %s: %s", p->key, p->met == 1 ? "met" : p->met == 0 ? "NOT met" : "not judged");
        if (p->measured[0]) fprintf(stderr, ": %s", p->measured);
        if (p->behind[0]) fprintf(stderr, " (%s)", p->behind);
        if (p->missing[0]) fprintf(stderr, "; not measured: %s", p->missing);
        fprintf(stderr, "%s\n", p->as_in_issue || !p->measured[0] ? "" : " [not the issue's scenario]");
    }
    for (int i = 0; i < 4; i++) free(pt[i].json);
    return all;
}
