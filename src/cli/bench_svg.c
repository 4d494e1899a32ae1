/* cli/bench_svg.c: the chart of one `tandem bench` run, a hand-written SVG
 * (no dependency). Panels stacked top to bottom, each drawn only where its
 * part of the run happened, each a <g id="panel-...">:
 *
 *   panel-tests        each test: one bar per route and one for llama.cpp
 *                      (end to end: total seconds, lower is better; ppN/tgN:
 *                      tokens/s, higher is better), scaled per test
 *   panel-sweep        end-to-end time of each forced route against prompt
 *                      length (log-log); the router's time as a ring in the
 *                      color of the route it picked
 *   panel-concurrency  TTFT p50, and TPOT p50/p99, against clients
 *   panel-stall        the running streams' inter-token gaps over time, the
 *                      new prompt's prefill window shaded, the p50 of each
 *                      window dashed: tandem, and llama.cpp beside it
 *
 * Every chart is made of the same primitives: plot_axes (frame, grid, ticks,
 * labels), plot_series (a line, dots or rings), legend and text. */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "cli/bench.h"

#define SVG_W 960
#define PAD_L 70 /* left margin of a plot: the y tick labels */
#define PANEL_GAP 24

static const char *const route_color[4] = {"#333333", "#1b9e77", "#7570b3", "#e7298a"}; /* by tandem_route */
#define COLOR_PEER "#d95f02"
#define COLOR_TANDEM "#2b7bb9"

/* ---- primitives --------------------------------------------------------------------- */

typedef struct axis {
    double lo, hi; /* data range (extended by axis_fit, then axis_pad) */
    int log;       /* log10 scale */
    const char *label;
    const double *ticks; /* explicit tick values, or NULL: chosen from the range */
    int n_ticks;
} axis;

typedef struct plot {
    double x, y, w, h; /* the plotting area, px */
    axis ax, ay;
} plot;

enum { S_LINE = 1, S_DOTS = 2, S_RINGS = 4, S_DASH = 8 };

/* text with XML escaping; anchor "start", "middle" or "end" */
static void text(FILE *f, double x, double y, int size, const char *anchor, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"%d\" text-anchor=\"%s\">", x, y, size, anchor);
    for (const char *c = buf; *c; c++) {
        if (*c == '<')
            fputs("&lt;", f);
        else if (*c == '>')
            fputs("&gt;", f);
        else if (*c == '&')
            fputs("&amp;", f);
        else if (*c == '"')
            fputs("&quot;", f);
        else
            fputc(*c, f);
    }
    fputs("</text>\n", f);
}

static void axis_fit(axis *a, double v)
{
    if (!(v > 0) && a->log) return;
    if (!isfinite(v)) return;
    if (a->lo > a->hi) a->lo = a->hi = v;
    if (v < a->lo) a->lo = v;
    if (v > a->hi) a->hi = v;
}

/* an empty axis: lo > hi until the first axis_fit */
static axis axis_new(int log, const char *label)
{
    return (axis){.lo = 1, .hi = 0, .log = log, .label = label};
}

/* margins around the data; linear axes start at 0 when the data is positive */
static void axis_pad(axis *a, int from_zero)
{
    if (a->lo > a->hi) a->lo = a->hi = 1;
    if (a->log) {
        a->lo /= 1.4;
        a->hi *= 1.4;
    } else {
        if (from_zero && a->lo > 0) a->lo = 0;
        double span = a->hi > a->lo ? a->hi - a->lo : (a->hi != 0 ? fabs(a->hi) : 1);
        a->hi += 0.08 * span;
        if (!from_zero || a->lo < 0) a->lo -= 0.04 * span;
    }
}

static double frac(const axis *a, double v)
{
    double t = a->log ? (log10(v > 0 ? v : a->lo) - log10(a->lo)) / (log10(a->hi) - log10(a->lo))
                      : (v - a->lo) / (a->hi - a->lo);
    return t < 0 ? 0 : t > 1 ? 1 : t;
}

static double px(const plot *p, double v)
{
    return p->x + frac(&p->ax, v) * p->w;
}
static double py(const plot *p, double v)
{
    return p->y + p->h - frac(&p->ay, v) * p->h;
}

/* tick values: the explicit ones, else 1-2-5 steps (log: per decade) */
static int ticks_of(const axis *a, double *t, int max)
{
    int n = 0;
    if (a->ticks) {
        for (int i = 0; i < a->n_ticks && n < max; i++)
            if (a->ticks[i] >= a->lo && a->ticks[i] <= a->hi) t[n++] = a->ticks[i];
        return n;
    }
    if (a->log) {
        static const double m[3] = {1, 2, 5};
        int k0 = (int)floor(log10(a->lo)), k1 = (int)ceil(log10(a->hi)), step = k1 - k0 > 4 ? 3 : 1;
        for (int k = k0; k <= k1; k++)
            for (int j = 0; j < 3; j += step) {
                double v = m[j] * pow(10, k);
                if (v >= a->lo && v <= a->hi && n < max) t[n++] = v;
            }
        return n;
    }
    double raw = (a->hi - a->lo) / 5, mag = pow(10, floor(log10(raw))), step = mag;
    if (2 * mag >= raw)
        step = 2 * mag;
    else if (5 * mag >= raw)
        step = 5 * mag;
    else
        step = 10 * mag;
    if (step < raw) step = 10 * mag;
    for (double v = ceil(a->lo / step) * step; v <= a->hi + 1e-9 * step && n < max; v += step)
        t[n++] = fabs(v) < 1e-12 ? 0 : v;
    return n;
}

/* the frame, grid lines, tick labels and axis labels of p, and its title */
static void plot_axes(FILE *f, const plot *p, const char *title)
{
    double t[32];
    fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"#fafafa\" stroke=\"#999\"/>\n", p->x,
            p->y, p->w, p->h);
    int n = ticks_of(&p->ax, t, 32);
    for (int i = 0; i < n; i++) {
        double x = px(p, t[i]);
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#e3e3e3\"/>\n", x, p->y, x,
                p->y + p->h);
        text(f, x, p->y + p->h + 14, 10, "middle", "%g", t[i]);
    }
    n = ticks_of(&p->ay, t, 32);
    for (int i = 0; i < n; i++) {
        double y = py(p, t[i]);
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#e3e3e3\"/>\n", p->x, y, p->x + p->w,
                y);
        text(f, p->x - 4, y + 3.5, 10, "end", "%g", t[i]);
    }
    if (p->ax.label) text(f, p->x + p->w / 2, p->y + p->h + 30, 11, "middle", "%s", p->ax.label);
    if (p->ay.label) {
        fprintf(f, "<g transform=\"translate(%.1f,%.1f) rotate(-90)\">\n", p->x - 46, p->y + p->h / 2);
        text(f, 0, 0, 11, "middle", "%s", p->ay.label);
        fputs("</g>\n", f);
    }
    if (title) text(f, p->x, p->y - 8, 12, "start", "%s", title);
}

/* a series of n points (points with y <= 0 on a log axis are skipped) */
static void plot_series(FILE *f, const plot *p, const double *x, const double *y, int n, const char *color, int style)
{
    if (style & S_LINE && n > 1) {
        fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.6\"%s points=\"", color,
                style & S_DASH ? " stroke-dasharray=\"5,3\"" : "");
        for (int i = 0; i < n; i++)
            if (!p->ay.log || y[i] > 0) fprintf(f, "%.1f,%.1f ", px(p, x[i]), py(p, y[i]));
        fputs("\"/>\n", f);
    }
    for (int i = 0; i < n && style & (S_DOTS | S_RINGS); i++) {
        if (p->ay.log && !(y[i] > 0)) continue;
        if (style & S_RINGS)
            fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"6\" fill=\"none\" stroke=\"%s\" stroke-width=\"2\"/>\n",
                    px(p, x[i]), py(p, y[i]), color);
        else
            fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"2.6\" fill=\"%s\"/>\n", px(p, x[i]), py(p, y[i]), color);
    }
}

/* a row of swatches with names, from (x, y); a ring swatch for style S_RINGS */
static void legend(FILE *f, double x, double y, const char *const *names, const char *const *colors, const int *styles,
                   int n)
{
    for (int i = 0; i < n; i++) {
        if (styles && styles[i] & S_RINGS)
            fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"5\" fill=\"none\" stroke=\"%s\" stroke-width=\"2\"/>\n",
                    x + 6, y - 4, colors[i]);
        else
            fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"12\" height=\"10\" fill=\"%s\"/>\n", x, y - 9, colors[i]);
        text(f, x + 16, y, 11, "start", "%s", names[i]);
        x += 28 + 6.5 * (double)strlen(names[i]);
    }
}

static void hbar(FILE *f, double x, double y, double len, const char *color, const char *label)
{
    fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"14\" fill=\"%s\"/>\n", x, y, len > 0 ? len : 0,
            color);
    text(f, x + (len > 0 ? len : 0) + 5, y + 11, 11, "start", "%s", label);
}

/* ---- panels: each draws at y0 and returns its height ---------------------------------- */

static double panel_tests(FILE *f, const bench_report *r, double y0)
{
    double y = y0 + 20;
    fprintf(f, "<g id=\"panel-tests\">\n");
    int any_peer = 0;
    for (int i = 0; i < r->n_rows; i++) any_peer |= r->rows[i].peer_reps > 0;
    text(f, 10, y0 + 14, 14, "start", "Tests, every route%s (medians; bars scaled per test)",
         any_peer ? " beside llama.cpp" : "");
    for (int i = 0; i < r->n_rows; i++) {
        const bench_row *t = &r->rows[i];
        int seen = 0;
        for (int j = 0; j < i; j++) seen |= !strcmp(r->rows[j].name, t->name);
        if (seen) continue;
        /* the test's bars: its routes, then llama.cpp once */
        const bench_row *g[8];
        int n = 0;
        const bench_row *peer = NULL;
        double mx = 0;
        for (int j = i; j < r->n_rows && n < 8; j++) {
            const bench_row *x = &r->rows[j];
            if (strcmp(x->name, t->name)) continue;
            g[n++] = x;
            if (x->value > mx) mx = x->value;
            if (x->peer_reps && (!peer || x->peer_beside)) peer = x;
        }
        if (peer && peer->peer_value > mx) mx = peer->peer_value;
        if (mx <= 0) mx = 1;
        int e = t->kind == 'e';
        text(f, 10, y + 14, 12, "start", e ? "%s: total, s (lower is better)" : "%s: tokens/s (higher is better)",
             t->name);
        y += 20;
        const double x0 = 200, len = SVG_W - x0 - 200;
        for (int k = 0; k < n + (peer != NULL); k++) {
            int is_peer = k == n;
            const bench_row *x = is_peer ? peer : g[k];
            double v = is_peer ? x->peer_value : x->value;
            char label[128];
            if (e && is_peer)
                snprintf(label, sizeof label, "%.2f s (TTFT %.2f s, %.0f MiB)", v, x->peer_ttft, x->peer_peak_mb);
            else if (e)
                snprintf(label, sizeof label, "%.2f s (TTFT %.2f s, %.0f MiB)", v, x->ttft, x->peak_mb);
            else
                snprintf(label, sizeof label, "%.1f t/s", v);
            text(f, x0 - 8, y + 11, 11, "end", "%s", is_peer ? "llama.cpp" : bench_route_name(x->route));
            hbar(f, x0, y, len * v / mx, is_peer ? COLOR_PEER : route_color[x->route & 3], label);
            y += 18;
        }
        y += 8;
    }
    fprintf(f, "</g>\n");
    return y - y0;
}

static double panel_sweep(FILE *f, const bench_report *r, double y0)
{
    int n = r->n_sweep;
    double *x = malloc(sizeof(double) * (size_t)n * 2);
    if (!x) return 0;
    double *y = x + n;
    plot p = {PAD_L, y0 + 50, SVG_W - PAD_L - 30, 260, axis_new(1, "prompt tokens"), axis_new(1, "end-to-end seconds")};
    for (int i = 0; i < n; i++) {
        x[i] = r->sweep[i].prompt;
        axis_fit(&p.ax, x[i]);
        for (int q = 0; q < 4; q++) axis_fit(&p.ay, r->sweep[i].t[q]);
    }
    p.ax.ticks = x;
    p.ax.n_ticks = n;
    axis_pad(&p.ax, 0);
    axis_pad(&p.ay, 0);
    fprintf(f, "<g id=\"panel-sweep\">\n");
    text(f, 10, y0 + 14, 14, "start",
         "Prompt-length sweep: end to end, prompt + %d generated tokens, every route "
         "(log-log)",
         n ? r->sweep[0].gen : 0);
    plot_axes(f, &p, NULL);
    for (int q = TANDEM_ROUTE_HYBRID; q <= TANDEM_ROUTE_DECODE_ONLY; q++) {
        for (int i = 0; i < n; i++) y[i] = r->sweep[i].t[q];
        plot_series(f, &p, x, y, n, route_color[q], S_LINE | S_DOTS);
    }
    for (int i = 0; i < n; i++) { /* the router: a ring in its pick's color */
        int pick = TANDEM_ROUTE_AUTO;
        for (int q = TANDEM_ROUTE_HYBRID; q <= TANDEM_ROUTE_DECODE_ONLY; q++)
            if (!strcmp(r->sweep[i].picked, bench_route_name(q))) pick = q;
        plot_series(f, &p, &x[i], &r->sweep[i].t[TANDEM_ROUTE_AUTO], 1, route_color[pick], S_RINGS);
    }
    static const char *const names[4] = {"hybrid", "prefill-only", "decode-only", "router (ring, in its pick's color)"};
    const char *const colors[4] = {route_color[1], route_color[2], route_color[3], route_color[0]};
    static const int styles[4] = {0, 0, 0, S_RINGS};
    legend(f, p.x, y0 + 36, names, colors, styles, 4);
    fprintf(f, "</g>\n");
    free(x);
    return p.h + 90;
}

static double panel_concurrency(FILE *f, const bench_report *r, double y0)
{
    int n = r->n_conc;
    double x[BENCH_MAX_CLIENTS], a[BENCH_MAX_CLIENTS], b[BENCH_MAX_CLIENTS], c[BENCH_MAX_CLIENTS];
    double w = (SVG_W - 2 * PAD_L - 40) / 2.0;
    plot pt = {PAD_L, y0 + 40, w, 200, axis_new(1, "clients"), axis_new(0, "TTFT p50, s")};
    plot pp = {2 * PAD_L + w + 10, y0 + 40, w, 200, axis_new(1, "clients"), axis_new(0, "TPOT, ms")};
    for (int i = 0; i < n; i++) {
        x[i] = r->conc[i].clients;
        a[i] = r->conc[i].ttft_p50;
        b[i] = 1e3 * r->conc[i].tpot_p50;
        c[i] = 1e3 * r->conc[i].tpot_p99;
        axis_fit(&pt.ax, x[i]);
        axis_fit(&pp.ax, x[i]);
        axis_fit(&pt.ay, a[i]);
        axis_fit(&pp.ay, b[i]);
        axis_fit(&pp.ay, c[i]);
    }
    pt.ax.ticks = pp.ax.ticks = x;
    pt.ax.n_ticks = pp.ax.n_ticks = n;
    axis_pad(&pt.ax, 0);
    axis_pad(&pp.ax, 0);
    axis_pad(&pt.ay, 1);
    axis_pad(&pp.ay, 1);
    fprintf(f, "<g id=\"panel-concurrency\">\n");
    char title[128];
    snprintf(title, sizeof title, "Concurrency: %d+%d requests, Poisson arrivals (mean gap %.1f s)", r->conc_P,
             r->conc_G, r->conc_gap);
    text(f, 10, y0 + 14, 14, "start", "%s", title);
    plot_axes(f, &pt, "time to first token");
    plot_series(f, &pt, x, a, n, COLOR_TANDEM, S_LINE | S_DOTS);
    plot_axes(f, &pp, "time per output token");
    plot_series(f, &pp, x, b, n, COLOR_TANDEM, S_LINE | S_DOTS);
    plot_series(f, &pp, x, c, n, COLOR_TANDEM, S_LINE | S_DOTS | S_DASH);
    static const char *const names[2] = {"p50", "p99 (dashed)"};
    static const char *const colors[2] = {COLOR_TANDEM, COLOR_TANDEM};
    legend(f, pp.x + pp.w - 200, y0 + 14, names, colors, NULL, 2);
    fprintf(f, "</g>\n");
    return pt.h + 80;
}

/* one engine's stall timeline: a line per stream, the prefill shaded, each window's p50 dashed */
static void stall_plot(FILE *f, const plot *p, const bench_stall_side *s, double quiet_s, const char *title,
                       const char *color)
{
    plot_axes(f, p, title);
    fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"#f5d76e\" fill-opacity=\"0.35\"/>\n",
            px(p, 0), p->y, px(p, s->prefill) - px(p, 0), p->h);
    int left = px(p, s->prefill) + 190 > p->x + p->w; /* no room right of the window: label it on its left */
    text(f, left ? px(p, 0) - 4 : px(p, 0) + 4, p->y + 14, 10, left ? "end" : "start",
         "the new prompt's prefill (%.2f s)", s->prefill);
    if (!s->tl) text(f, p->x + p->w / 2, p->y + p->h / 2, 11, "middle", "no timeline recorded");
    double *x = malloc(sizeof(double) * 2 * (size_t)(s->n_tl + 1));
    for (int i = 0, j; x && i < s->n_tl; i = j) { /* the timeline holds each stream's gaps in order */
        double *y = x + s->n_tl + 1;
        int k = 0;
        for (j = i; j < s->n_tl && s->tl[j].stream == s->tl[i].stream; j++, k++) {
            x[k] = s->tl[j].t;
            y[k] = 1e3 * s->tl[j].gap;
        }
        plot_series(f, p, x, y, k, color, k > 150 ? S_LINE : S_LINE | S_DOTS);
    }
    free(x);
    double wx[2] = {-quiet_s, 0}, wy[2] = {1e3 * s->q50, 1e3 * s->q50};
    plot_series(f, p, wx, wy, 2, "#000000", S_LINE | S_DASH);
    wx[0] = 0;
    wx[1] = s->prefill;
    wy[0] = wy[1] = 1e3 * s->d50;
    plot_series(f, p, wx, wy, 2, "#000000", S_LINE | S_DASH);
}

static double panel_stall(FILE *f, const bench_report *r, double y0)
{
    const bench_stall_res *s = r->stall;
    const bench_stall_side *side[2] = {&s->ours, &s->peer};
    int n = s->peer.reps > 0 ? 2 : 1;
    double w = n == 2 ? (SVG_W - 2 * PAD_L - 40) / 2.0 : SVG_W - PAD_L - 30;
    axis ax = axis_new(0, "seconds since the new prompt arrived"), ay = axis_new(1, "gap between tokens, ms");
    for (int k = 0; k < n; k++) {
        axis_fit(&ax, -s->quiet_s);
        axis_fit(&ax, side[k]->prefill);
        axis_fit(&ay, 1e3 * side[k]->q50);
        axis_fit(&ay, 1e3 * side[k]->d50);
        for (int i = 0; i < side[k]->n_tl; i++) {
            axis_fit(&ax, side[k]->tl[i].t);
            axis_fit(&ay, 1e3 * side[k]->tl[i].gap);
        }
    }
    axis_pad(&ax, 0);
    axis_pad(&ay, 0);
    fprintf(f, "<g id=\"panel-stall\">\n");
    text(f, 10, y0 + 14, 14, "start",
         "Decode stall: %d streams running, a %d-token prompt arrives at 0 (dashed: "
         "p50 of each window)",
         s->streams, s->P);
    for (int k = 0; k < n; k++) {
        plot p = {k ? 2 * PAD_L + w + 10 : PAD_L, y0 + 40, w, 220, ax, ay};
        char title[128];
        if (k)
            snprintf(title, sizeof title, "llama.cpp (server schedule): rise %.2fx", side[k]->ratio);
        else
            snprintf(title, sizeof title, "tandem (%s): rise %.2fx", s->lend_mode, side[k]->ratio);
        stall_plot(f, &p, side[k], s->quiet_s, title, k ? COLOR_PEER : COLOR_TANDEM);
    }
    fprintf(f, "</g>\n");
    return 220 + 80;
}

/* ---- the document -------------------------------------------------------------------- */

void bench_svg(FILE *f, const bench_report *r)
{
    char *body = NULL;
    size_t len = 0;
    FILE *b = open_memstream(&body, &len);
    if (!b) return;
    double y = 36;
    if (r->n_rows) y += panel_tests(b, r, y) + PANEL_GAP;
    if (r->sweep && r->n_sweep) y += panel_sweep(b, r, y) + PANEL_GAP;
    if (r->conc && r->n_conc) y += panel_concurrency(b, r, y) + PANEL_GAP;
    if (r->stall) y += panel_stall(b, r, y) + PANEL_GAP;
    fclose(b);
    fprintf(f,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%.0f\" viewBox=\"0 0 %d %.0f\" "
            "font-family=\"sans-serif\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
            SVG_W, y, SVG_W, y);
    const char *model = strrchr(r->model, '/') ? strrchr(r->model, '/') + 1 : r->model;
    if (r->threads > 0)
        text(f, 10, 22, 16, "start", "tandem bench: %s, %d threads", model, r->threads);
    else
        text(f, 10, 22, 16, "start", "tandem bench: %s, all cores", model);
    fputs(body ? body : "", f);
    fputs("</svg>\n", f);
    free(body);
}
