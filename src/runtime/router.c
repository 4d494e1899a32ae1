/* runtime/router.c: the calibrated router (see router.h for the cost model).
 *
 *   cost model     features, prediction, the pick, the fallback rule
 *   fitting        weighted non-negative least squares, tm_router_fit
 *   cache          key, model identity, JSON save/load
 *   session        tm_router_session_init, tm_router_pick, --explain lines
 *   calibration    requests with forced routes, decode steps, lending factors */
#include "runtime/router.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "core/clock.h"
#include "core/cpu.h"
#include "core/fileio.h"
#include "core/threadpool.h"
#include "model/model.h"
#include "core/tunecache.h"
#include "pkg/checksum.h"
#include "runtime/session-impl.h"


static const tandem_route k_routes[3] = {TANDEM_ROUTE_HYBRID, TANDEM_ROUTE_PREFILL_ONLY, TANDEM_ROUTE_DECODE_ONLY};

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    if (n <= 0) return 0;
    qsort(v, (size_t)n, sizeof(double), cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* ---- cost model ------------------------------------------------------------------ */

void tm_router_prefill_features(const int *chunks, int n_chunks, int n, double f[TM_ROUTER_NPF])
{
    tm_engine_caps caps;
    memset(&caps, 0, sizeof caps);
    caps.n_chunks = n_chunks < 0 ? 0 : n_chunks > 8 ? 8 : n_chunks;
    for (int i = 0; i < caps.n_chunks; i++) caps.chunk_sizes[i] = chunks[i];
    double nch = 0, pad = 0, attn = 0;
    for (int pos = 0; pos < n;) {
        int T = tm_plan_chunk(&caps, n - pos);
        if (T <= 0) break;
        int nv = n - pos < T ? n - pos : T;
        nch += 1;
        pad += T;
        attn += (double)T * ((double)pos + 0.5 * T);
        pos += nv;
    }
    f[0] = 1;
    f[1] = nch;
    f[2] = pad;
    f[3] = attn * 1e-6;
}

double tm_router_prefill_time(const tm_router_costs *c, tandem_route r, int n)
{
    if (r < TANDEM_ROUTE_HYBRID || r > TANDEM_ROUTE_DECODE_ONLY) return 0;
    double f[TM_ROUTER_NPF], t = 0;
    tm_router_prefill_features(c->chunk_sizes[r], c->n_chunks[r], n, f);
    for (int j = 0; j < TM_ROUTER_NPF; j++) t += c->pf[r][j] * f[j];
    return t;
}

double tm_router_tpot(const tm_router_costs *c, tandem_route r, double ctx)
{
    if (r < TANDEM_ROUTE_HYBRID || r > TANDEM_ROUTE_DECODE_ONLY) return 0;
    return c->tpot[r][0] + c->tpot[r][1] * ctx * 1e-3;
}

double tm_router_step_time(const tm_router_costs *c, int B, double ctx_sum)
{
    return c->step[0] + c->step[1] * (B > 1 ? B - 1 : 0) + c->step[2] * ctx_sum * 1e-3;
}

static double nonneg(double x) { return x > 0 ? x : 0; }

void tm_router_predict(const tm_router_costs *c, int n_prompt, int n_out, const tm_router_load *load,
                       tm_router_pred *p)
{
    tm_router_load ld = load ? *load : (tm_router_load){0};
    memset(p, 0, sizeof *p);
    p->n_prompt = n_prompt;
    p->n_out = n_out < 1 ? 1 : n_out;
    p->load = ld;
    p->calibrated = 1;
    int nd = ld.n_decoding > 0 ? ld.n_decoding : 0, nq = ld.n_queued > 0 ? ld.n_queued : 0;
    double ctx = n_prompt + 0.5 * p->n_out;
    /* which cores each side gets (sched.c's idle lending): the prefill side
     * borrows every core while nothing decodes, the decode side while the
     * prefill side has no work */
    double slow_pre = nd > 0 || ld.no_lend ? c->lend_pre : 1;
    double slow_dec = nq > 0 || ld.no_lend || ld.no_lend_dec ? c->lend_dec : 1;
    /* what one more sequence (at context ctx) adds to every step of the batch */
    double per_seq = c->step[1] + c->step[2] * ctx * 1e-3;
    double best = INFINITY;
    p->pick = TANDEM_ROUTE_HYBRID;
    for (int i = 0; i < 3; i++) {
        tandem_route r = k_routes[i];
        if (!(c->routes & (1u << r))) {
            p->ttft[r] = p->tpot[r] = p->own[r] = p->others[r] = INFINITY;
            continue;
        }
        double pre, ttft, tpot, others;
        if (r == TANDEM_ROUTE_HYBRID) {
            /* stateful hybrid prefills like prefill-only (straight into decode pages), no copy */
            tandem_route pr = ld.stateful && (c->routes & (1u << TANDEM_ROUTE_PREFILL_ONLY)) ? TANDEM_ROUTE_PREFILL_ONLY : r;
            pre = tm_router_prefill_time(c, pr, n_prompt) * slow_pre;
            double ho = ld.stateful ? 0 : nonneg(c->handoff[0] + c->handoff[1] * n_prompt);
            ttft = pre + ho + c->first[r];
            tpot = (tm_router_tpot(c, r, ctx) + nd * per_seq) * slow_dec;
            others = nq * (pre + ho) + nd * (p->n_out - 1) * per_seq;
        } else if (r == TANDEM_ROUTE_PREFILL_ONLY) {
            pre = tm_router_prefill_time(c, r, n_prompt) * slow_pre;
            ttft = pre + c->first[r];
            tpot = tm_router_tpot(c, r, ctx) * slow_pre;
            /* the prefill worker runs the whole request: the queue waits for it, and
             * so would every prompt that arrives meanwhile (not priced: ruled out) */
            others = nq * (ttft + (p->n_out - 1) * nonneg(tpot));
            if (ld.multi) p->ruled_out[r] = TM_ROUTER_HOLDS;
        } else {
            /* prefilled on the decode worker, after its current step; the batch waits */
            pre = tm_router_prefill_time(c, r, n_prompt) * slow_dec;
            double wait = nd > 0 ? tm_router_step_time(c, nd, nd * ctx) * slow_dec : 0;
            ttft = wait + pre + c->first[r];
            tpot = (tm_router_tpot(c, r, ctx) + nd * per_seq) * slow_dec;
            others = nd * pre + nd * (p->n_out - 1) * per_seq;
            /* the stall bound: the running streams get no token while it prefills */
            if (nd > 0 && ld.max_stall > 0 && pre > ld.max_stall * wait) p->ruled_out[r] = TM_ROUTER_STALLS;
        }
        ttft = nonneg(ttft);
        tpot = nonneg(tpot);
        p->ttft[r] = ttft;
        p->tpot[r] = tpot;
        p->own[r] = ttft + (p->n_out - 1) * tpot;
        p->others[r] = others;
        if (!p->ruled_out[r] && p->own[r] + others < best) {
            best = p->own[r] + others;
            p->pick = r;
        }
    }
}

tandem_route tm_router_rule(const int *chunks, int n_chunks, int n_prompt)
{
    int smallest = n_chunks > 0 ? chunks[0] : 64;
    for (int i = 1; i < n_chunks; i++)
        if (chunks[i] < smallest) smallest = chunks[i];
    return n_prompt < smallest / 4 ? TANDEM_ROUTE_DECODE_ONLY : TANDEM_ROUTE_HYBRID;
}

/* ---- fitting ------------------------------------------------------------------------ */

/* Solve A x = b (k x k, in place) by Gaussian elimination with partial
 * pivoting; 0 if singular. */
static int solve(double *A, double *b, int k, double *x)
{
    for (int c = 0; c < k; c++) {
        int piv = c;
        for (int r = c + 1; r < k; r++)
            if (fabs(A[r * k + c]) > fabs(A[piv * k + c])) piv = r;
        if (fabs(A[piv * k + c]) < 1e-10) return 0; /* columns are scaled: a unit diagonal */
        if (piv != c) {
            for (int j = 0; j < k; j++) {
                double t = A[c * k + j]; A[c * k + j] = A[piv * k + j]; A[piv * k + j] = t;
            }
            double t = b[c]; b[c] = b[piv]; b[piv] = t;
        }
        for (int r = c + 1; r < k; r++) {
            double f = A[r * k + c] / A[c * k + c];
            for (int j = c; j < k; j++) A[r * k + j] -= f * A[c * k + j];
            b[r] -= f * b[c];
        }
    }
    for (int c = k - 1; c >= 0; c--) {
        double s = b[c];
        for (int j = c + 1; j < k; j++) s -= A[c * k + j] * x[j];
        x[c] = s / A[c * k + c];
    }
    return 1;
}

#define NNLS_MAXK 6

int tm_router_nnls(const double *X, const double *y, const double *w, int n, int k, double *coef)
{
    if (n < 1 || k < 1 || k > NNLS_MAXK) return TM_E_INVALID;
    for (int i = 0; i < n; i++) {
        if (!isfinite(y[i]) || (w && (!isfinite(w[i]) || w[i] < 0))) return TM_E_INVALID;
        for (int j = 0; j < k; j++)
            if (!isfinite(X[i * k + j])) return TM_E_INVALID;
    }
    /* column scales: sqrt(sum w x^2), so the normal matrix has a unit diagonal */
    double scale[NNLS_MAXK];
    for (int j = 0; j < k; j++) {
        double s = 0;
        for (int i = 0; i < n; i++) s += (w ? w[i] : 1) * X[i * k + j] * X[i * k + j];
        scale[j] = s > 0 ? sqrt(s) : 0;
    }
    double best_sse = 0;
    for (int i = 0; i < n; i++) best_sse += (w ? w[i] : 1) * y[i] * y[i]; /* all zero */
    for (int j = 0; j < k; j++) coef[j] = 0;
    for (unsigned mask = 1; mask < (1u << k); mask++) {
        int cols[NNLS_MAXK], m = 0, skip = 0;
        for (int j = 0; j < k; j++)
            if (mask & (1u << j)) {
                if (scale[j] == 0) skip = 1;
                cols[m++] = j;
            }
        if (skip) continue;
        double A[NNLS_MAXK * NNLS_MAXK] = {0}, b[NNLS_MAXK] = {0}, x[NNLS_MAXK];
        for (int i = 0; i < n; i++) {
            double wi = w ? w[i] : 1;
            for (int a = 0; a < m; a++) {
                double xa = X[i * k + cols[a]] / scale[cols[a]];
                b[a] += wi * xa * y[i];
                for (int c = 0; c < m; c++) A[a * m + c] += wi * xa * X[i * k + cols[c]] / scale[cols[c]];
            }
        }
        if (!solve(A, b, m, x)) continue;
        int feasible = 1;
        for (int a = 0; a < m; a++) {
            x[a] /= scale[cols[a]];
            if (!(x[a] >= 0)) feasible = 0;
        }
        if (!feasible) continue;
        double sse = 0;
        for (int i = 0; i < n; i++) {
            double pr = 0;
            for (int a = 0; a < m; a++) pr += X[i * k + cols[a]] * x[a];
            sse += (w ? w[i] : 1) * (pr - y[i]) * (pr - y[i]);
        }
        if (sse < best_sse * (1 - 1e-12)) {
            best_sse = sse;
            for (int j = 0; j < k; j++) coef[j] = 0;
            for (int a = 0; a < m; a++) coef[cols[a]] = x[a];
        }
    }
    return TM_OK;
}

/* relative-error weight, floored so near-zero times do not dominate */
static double rel_weight(double t, double floor_s)
{
    double d = fabs(t) > floor_s ? fabs(t) : floor_s;
    return 1.0 / (d * d);
}

int tm_router_fit(tm_router_costs *c, const tm_router_meas *m, int n, tm_err *err)
{
    int rc = TM_OK;
    double *X = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1) * TM_ROUTER_NPF);
    double *y = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
    double *w = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
    double *v = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
    if (!X || !y || !w || !v) { rc = tm_errf(err, TM_E_NOMEM, "router fit: out of memory"); goto done; }
    memset(c->pf, 0, sizeof c->pf);
    memset(c->first, 0, sizeof c->first);
    memset(c->tpot, 0, sizeof c->tpot);
    memset(c->step, 0, sizeof c->step);
    c->handoff[0] = c->handoff[1] = 0;
    c->routes = 0;
    /* per route: prefill, the first-token overhead, and the time per output token */
    for (int i = 0; i < 3; i++) {
        tandem_route r = k_routes[i];
        int k = 0, nf = 0;
        for (int j = 0; j < n; j++) {
            if (m[j].kind != TM_ROUTER_MEAS_PREFILL || m[j].route != (int)r) continue;
            tm_router_prefill_features(c->chunk_sizes[r], c->n_chunks[r], m[j].n, X + (size_t)k * TM_ROUTER_NPF);
            y[k] = m[j].t;
            w[k] = rel_weight(m[j].t, 1e-4);
            if (isfinite(m[j].t_first)) v[nf++] = m[j].t_first;
            k++;
        }
        if (k == 0) continue; /* not measured: the route is unavailable */
        if (tm_router_nnls(X, y, w, k, TM_ROUTER_NPF, c->pf[r]) != TM_OK) {
            rc = tm_errf(err, TM_E_INVALID, "router fit: %s prefill measurements are not finite", tm_route_name(r));
            goto done;
        }
        c->first[r] = median(v, nf);
        k = 0;
        for (int j = 0; j < n; j++)
            if (m[j].kind == TM_ROUTER_MEAS_TOKEN && m[j].route == (int)r && isfinite(m[j].t)) {
                X[k * 2] = 1;
                X[k * 2 + 1] = m[j].ctx * 1e-3;
                y[k] = m[j].t;
                w[k] = rel_weight(m[j].t, 1e-5);
                k++;
            }
        if (k == 0) {
            rc = tm_errf(err, TM_E_INVALID, "router fit: no time-per-token measurements for route %s", tm_route_name(r));
            goto done;
        }
        if (tm_router_nnls(X, y, w, k, 2, c->tpot[r]) != TM_OK) {
            rc = tm_errf(err, TM_E_INVALID, "router fit: %s time-per-token measurements are not finite", tm_route_name(r));
            goto done;
        }
        c->routes |= 1u << r;
    }
    if (!c->routes) { rc = tm_errf(err, TM_E_INVALID, "router fit: no prefill measurements for any route"); goto done; }
    /* exposed hand-off of the hybrid route: h0 + h1 n */
    {
        int k = 0;
        for (int j = 0; j < n; j++)
            if (m[j].kind == TM_ROUTER_MEAS_PREFILL && m[j].route == TANDEM_ROUTE_HYBRID) {
                X[k * 2] = 1;
                X[k * 2 + 1] = m[j].n;
                y[k] = m[j].t_handoff;
                w[k] = rel_weight(m[j].t_handoff, 1e-4);
                k++;
            }
        if (k > 0 && tm_router_nnls(X, y, w, k, 2, c->handoff) != TM_OK) {
            rc = tm_errf(err, TM_E_INVALID, "router fit: hand-off measurements are not finite");
            goto done;
        }
    }
    /* decode-engine steps by batch: a + b (B-1) + c ctx_sum/1000 */
    {
        int k = 0;
        for (int j = 0; j < n; j++)
            if (m[j].kind == TM_ROUTER_MEAS_STEP) {
                X[k * 3] = 1;
                X[k * 3 + 1] = m[j].B > 1 ? m[j].B - 1 : 0;
                X[k * 3 + 2] = m[j].ctx * 1e-3;
                y[k] = m[j].t;
                w[k] = rel_weight(m[j].t, 1e-5);
                k++;
            }
        if (k == 0 && (c->routes & (1u << TANDEM_ROUTE_HYBRID | 1u << TANDEM_ROUTE_DECODE_ONLY))) {
            rc = tm_errf(err, TM_E_INVALID, "router fit: no decode-step measurements of the decode engine");
            goto done;
        }
        if (k > 0 && tm_router_nnls(X, y, w, k, TM_ROUTER_NSTEP, c->step) != TM_OK) {
            rc = tm_errf(err, TM_E_INVALID, "router fit: decode-step measurements are not finite");
            goto done;
        }
    }
    /* lending factors: median of the measured ratios, at least 1 */
    for (int side = 0; side < 2; side++) {
        int k = 0;
        for (int j = 0; j < n; j++)
            if (m[j].kind == TM_ROUTER_MEAS_LEND && m[j].side == side && isfinite(m[j].t) && m[j].t > 0) v[k++] = m[j].t;
        double f = k ? median(v, k) : 1;
        if (f < 1) f = 1;
        if (side == 0) c->lend_pre = f;
        else c->lend_dec = f;
    }
    /* the ranges a cache file may hold (tm_router_read checks the same) */
    for (int r = 0; r < 4; r++) {
        for (int q = 0; q < TM_ROUTER_NPF; q++)
            if (!(c->pf[r][q] <= 1e6)) rc = TM_E_INVALID;
        if (!(c->tpot[r][0] <= 1e6 && c->tpot[r][1] <= 1e6 && fabs(c->first[r]) <= 1e3)) rc = TM_E_INVALID;
    }
    for (int q = 0; q < TM_ROUTER_NSTEP; q++)
        if (!(c->step[q] <= 1e6)) rc = TM_E_INVALID;
    if (!(c->handoff[0] <= 1e6 && c->handoff[1] <= 1e6 && c->lend_pre <= 1e3 && c->lend_dec <= 1e3)) rc = TM_E_INVALID;
    if (rc != TM_OK) rc = tm_errf(err, TM_E_INVALID, "router fit: a coefficient is out of range (absurd measurements)");
done:
    free(X);
    free(y);
    free(w);
    free(v);
    return rc;
}

/* ---- cache: key and model identity -------------------------------------------------- */

static uint64_t rd_le64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

static void hash_stat(tm_xxh64_state *h, const char *dir, const char *name)
{
    char p[4096];
    struct stat st;
    if (tm_path_join(p, sizeof p, dir, name) != TM_OK || stat(p, &st) != 0) return;
    int64_t rec[4] = {(int64_t)st.st_size, (int64_t)st.st_mtim.tv_sec, (int64_t)st.st_mtim.tv_nsec, 0};
    tm_xxh64_update(h, name, strlen(name) + 1);
    tm_xxh64_update(h, rec, sizeof rec);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int tm_router_model_id(const char *path, char *out, size_t n, tm_err *err)
{
    char real[4096];
    if (!realpath(path, real)) return tm_errf(err, TM_E_IO, "%s: %s", path, strerror(errno));
    tm_xxh64_state h;
    tm_xxh64_init(&h, 0);
    if (tm_is_dir(real)) {
        /* a HF directory, converted on the fly: its path, config.json and every shard */
        tm_xxh64_update(&h, real, strlen(real) + 1);
        hash_stat(&h, real, "config.json");
        DIR *d = opendir(real);
        if (!d) return tm_errf(err, TM_E_IO, "%s: %s", real, strerror(errno));
        char *names[1024];
        int k = 0;
        struct dirent *e;
        while ((e = readdir(d)) && k < 1024) {
            size_t l = strlen(e->d_name);
            if (l > 12 && strcmp(e->d_name + l - 12, ".safetensors") == 0 && (names[k] = strdup(e->d_name))) k++;
        }
        closedir(d);
        qsort(names, (size_t)k, sizeof *names, cmp_str);
        for (int i = 0; i < k; i++) {
            hash_stat(&h, real, names[i]);
            free(names[i]);
        }
        snprintf(out, n, "hf:%016llx", (unsigned long long)tm_xxh64_digest(&h));
        return TM_OK;
    }
    /* a package: its header hash covers the index, which holds every tensor's hash */
    unsigned char hdr[64];
    FILE *f = fopen(real, "rb");
    if (!f) return tm_errf(err, TM_E_IO, "%s: %s", real, strerror(errno));
    size_t got = fread(hdr, 1, sizeof hdr, f);
    fclose(f);
    if (got == sizeof hdr && memcmp(hdr, "TNDM", 4) == 0) {
        snprintf(out, n, "pkg:%016llx-%llu", (unsigned long long)rd_le64(hdr + 56), (unsigned long long)rd_le64(hdr + 16));
        return TM_OK;
    }
    struct stat st;
    if (stat(real, &st) != 0) return tm_errf(err, TM_E_IO, "%s: %s", real, strerror(errno));
    tm_xxh64_update(&h, real, strlen(real) + 1);
    int64_t rec[3] = {(int64_t)st.st_size, (int64_t)st.st_mtim.tv_sec, (int64_t)st.st_mtim.tv_nsec};
    tm_xxh64_update(&h, rec, sizeof rec);
    snprintf(out, n, "file:%016llx", (unsigned long long)tm_xxh64_digest(&h));
    return TM_OK;
}

int tm_router_key_of(const tm_session *s, tm_router_key *k, tm_err *err)
{
    memset(k, 0, sizeof *k);
    snprintf(k->cpu, sizeof k->cpu, "%s", tm_cpu_get()->brand);
    const tm_core_plan *p = &s->plan;
    int shared = p->n_pre == 1 && p->n_dec == 1 && p->pre_cpus[0] == p->dec_cpus[0];
    k->threads = shared ? 1 : p->n_pre + p->n_dec;
    k->prefill_threads = p->n_pre;
    size_t o = 0;
    for (int i = 0; i < p->n_pre + p->n_dec && o < sizeof k->cpus; i++) {
        int pre = i < p->n_pre, cpu = pre ? p->pre_cpus[i] : p->dec_cpus[i - p->n_pre];
        int w = snprintf(k->cpus + o, sizeof k->cpus - o, "%s%d", i == 0 ? "" : i == p->n_pre ? "|" : ",", cpu);
        if (w < 0) break;
        o += (size_t)w; /* a longer list is cut at the buffer's end (snprintf stops there) */
    }
    snprintf(k->prefill_engine, sizeof k->prefill_engine, "%s", s->pre.caps.name ? s->pre.caps.name : "?");
    snprintf(k->decode_engine, sizeof k->decode_engine, "%s", s->dec.caps.name ? s->dec.caps.name : "?");
    snprintf(k->prefill_enc, sizeof k->prefill_enc, "%s", tm_dtype_name(s->rm->prefill_enc));
    snprintf(k->decode_enc, sizeof k->decode_enc, "%s", tm_dtype_name(s->rm->decode_enc));
    snprintf(k->build, sizeof k->build, "%s", tm_build_id());
    return tm_router_model_id(s->rm->path, k->model, sizeof k->model, err);
}

/* The key as one canonical line (hashed into the file name, compared on load). */
static void key_line(const tm_router_key *k, char *buf, size_t n)
{
    snprintf(buf, n, "%s|%d|%d|%s|%s|%s|%s|%s|%s|%s", k->cpu, k->threads, k->prefill_threads, k->cpus,
             k->prefill_engine, k->decode_engine, k->prefill_enc, k->decode_enc, k->model, k->build);
}

int tm_router_key_equal(const tm_router_key *a, const tm_router_key *b)
{
    char x[512], y[512];
    key_line(a, x, sizeof x);
    key_line(b, y, sizeof y);
    return strcmp(x, y) == 0;
}

int tm_router_cache_path(char *buf, size_t n, const char *dir, const tm_router_key *k, tm_err *err)
{
    char d[4096];
    if (dir) snprintf(d, sizeof d, "%s", dir);
    else if (tm_cache_dir(d, sizeof d, err) != TM_OK) return err ? err->code : TM_E_NOTFOUND;
    char line[512];
    key_line(k, line, sizeof line);
    int w = snprintf(buf, n, "%s/router-%016llx.json", d, (unsigned long long)tm_xxh64(line, strlen(line), 0));
    if (w < 0 || (size_t)w >= n) return tm_errf(err, TM_E_INVALID, "router cache: path too long");
    return TM_OK;
}

/* ---- cache: JSON ------------------------------------------------------------------------ */

static cJSON *num_array(const double *v, int n)
{
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; a && i < n; i++) cJSON_AddItemToArray(a, cJSON_CreateNumber(v[i]));
    return a;
}

static char *costs_json(const tm_router_key *k, const tm_router_costs *c)
{
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "format", "tandem-router");
    cJSON_AddNumberToObject(root, "version", 2); /* 2: key.cpus; decode-only planned in exact chunks */
    cJSON *key = cJSON_AddObjectToObject(root, "key");
    cJSON_AddStringToObject(key, "cpu", k->cpu);
    cJSON_AddNumberToObject(key, "threads", k->threads);
    cJSON_AddNumberToObject(key, "prefill_threads", k->prefill_threads);
    cJSON_AddStringToObject(key, "cpus", k->cpus);
    cJSON_AddStringToObject(key, "prefill_engine", k->prefill_engine);
    cJSON_AddStringToObject(key, "decode_engine", k->decode_engine);
    cJSON_AddStringToObject(key, "prefill_encoding", k->prefill_enc);
    cJSON_AddStringToObject(key, "decode_encoding", k->decode_enc);
    cJSON_AddStringToObject(key, "model", k->model);
    cJSON_AddStringToObject(key, "build", k->build);
    cJSON *routes = cJSON_AddObjectToObject(root, "routes");
    for (int i = 0; i < 3; i++) {
        tandem_route r = k_routes[i];
        if (!(c->routes & (1u << r))) continue;
        cJSON *o = cJSON_AddObjectToObject(routes, tm_route_name(r));
        int ch[8];
        for (int j = 0; j < c->n_chunks[r]; j++) ch[j] = c->chunk_sizes[r][j];
        cJSON_AddItemToObject(o, "chunks", cJSON_CreateIntArray(ch, c->n_chunks[r]));
        cJSON_AddItemToObject(o, "prefill", num_array(c->pf[r], TM_ROUTER_NPF));
        cJSON_AddNumberToObject(o, "first_token_s", c->first[r]);
        cJSON_AddItemToObject(o, "tpot", num_array(c->tpot[r], 2));
    }
    cJSON_AddItemToObject(root, "handoff", num_array(c->handoff, 2));
    cJSON_AddItemToObject(root, "step", num_array(c->step, TM_ROUTER_NSTEP));
    cJSON *ld = cJSON_AddObjectToObject(root, "lend");
    cJSON_AddNumberToObject(ld, "prefill", c->lend_pre);
    cJSON_AddNumberToObject(ld, "decode", c->lend_dec);
    char *s = cJSON_Print(root);
    cJSON_Delete(root);
    return s;
}

int tm_router_write(const char *path, const tm_router_key *k, const tm_router_costs *c, tm_err *err)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash && slash != dir) {
        *slash = '\0';
        int rc = tm_mkdir_p(dir, err);
        if (rc != TM_OK) return rc;
    }
    char *json = costs_json(k, c);
    if (!json) return tm_errf(err, TM_E_NOMEM, "%s: out of memory", path);
    tm_afile a;
    int rc = tm_afile_open(&a, path, err);
    if (rc == TM_OK) {
        if (fputs(json, a.f) < 0 || fputc('\n', a.f) < 0) {
            tm_afile_abort(&a);
            rc = tm_errf(err, TM_E_IO, "%s: write failed", path);
        } else rc = tm_afile_commit(&a, err);
    }
    free(json);
    return rc;
}

/* Reading: every field is checked, and the first bad one is named. */
typedef struct jrd {
    const char *path;
    tm_err *err;
    int rc;
} jrd;

static int jbad(jrd *j, const char *field, const char *what)
{
    if (j->rc == TM_OK) j->rc = tm_errf(j->err, TM_E_FORMAT, "%s: field '%s': %s", j->path, field, what);
    return j->rc;
}

static double jnum(jrd *j, const cJSON *o, const char *name, const char *field, double lo, double hi)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble < lo || v->valuedouble > hi) {
        char what[96];
        snprintf(what, sizeof what, "%s (a number in [%g, %g])", v ? "out of range" : "missing", lo, hi);
        jbad(j, field, what);
        return 0;
    }
    return v->valuedouble;
}

static void jnums(jrd *j, const cJSON *o, const char *name, const char *field, double *out, int n, double lo, double hi)
{
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, name);
    if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) != n) {
        char what[64];
        snprintf(what, sizeof what, "not an array of %d numbers", n);
        jbad(j, field, what);
        return;
    }
    for (int i = 0; i < n; i++) {
        const cJSON *v = cJSON_GetArrayItem(a, i);
        if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble < lo || v->valuedouble > hi) {
            char what[96];
            snprintf(what, sizeof what, "element %d is not a number in [%g, %g]", i, lo, hi);
            jbad(j, field, what);
            return;
        }
        out[i] = v->valuedouble;
    }
}

static void jstr(jrd *j, const cJSON *o, const char *name, char *out, size_t n)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    char field[64];
    snprintf(field, sizeof field, "key.%s", name);
    if (!cJSON_IsString(v) || strlen(v->valuestring) >= n) jbad(j, field, "missing or not a short string");
    else snprintf(out, n, "%s", v->valuestring);
}

static void parse_costs(jrd *j, const cJSON *root, tm_router_key *k, tm_router_costs *c)
{
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(root, "format");
    if (!cJSON_IsString(fmt) || strcmp(fmt->valuestring, "tandem-router") != 0) {
        jbad(j, "format", "not \"tandem-router\"");
        return;
    }
    if (jnum(j, root, "version", "version", 2, 2) != 2) return;
    const cJSON *key = cJSON_GetObjectItemCaseSensitive(root, "key");
    if (!cJSON_IsObject(key)) { jbad(j, "key", "missing or not an object"); return; }
    jstr(j, key, "cpu", k->cpu, sizeof k->cpu);
    k->threads = (int)jnum(j, key, "threads", "key.threads", 1, 65536);
    k->prefill_threads = (int)jnum(j, key, "prefill_threads", "key.prefill_threads", 1, 65536);
    jstr(j, key, "cpus", k->cpus, sizeof k->cpus);
    jstr(j, key, "prefill_engine", k->prefill_engine, sizeof k->prefill_engine);
    jstr(j, key, "decode_engine", k->decode_engine, sizeof k->decode_engine);
    jstr(j, key, "prefill_encoding", k->prefill_enc, sizeof k->prefill_enc);
    jstr(j, key, "decode_encoding", k->decode_enc, sizeof k->decode_enc);
    jstr(j, key, "model", k->model, sizeof k->model);
    jstr(j, key, "build", k->build, sizeof k->build);
    const cJSON *routes = cJSON_GetObjectItemCaseSensitive(root, "routes");
    if (!cJSON_IsObject(routes)) { jbad(j, "routes", "missing or not an object"); return; }
    for (int i = 0; i < 3 && j->rc == TM_OK; i++) {
        tandem_route r = k_routes[i];
        const cJSON *o = cJSON_GetObjectItemCaseSensitive(routes, tm_route_name(r));
        if (!o) continue;
        char f[96];
        snprintf(f, sizeof f, "routes.%s", tm_route_name(r));
        if (!cJSON_IsObject(o)) { jbad(j, f, "not an object"); return; }
        const cJSON *ch = cJSON_GetObjectItemCaseSensitive(o, "chunks");
        snprintf(f, sizeof f, "routes.%s.chunks", tm_route_name(r));
        if (!cJSON_IsArray(ch) || cJSON_GetArraySize(ch) > 8) { jbad(j, f, "not an array of at most 8 chunk sizes"); return; }
        c->n_chunks[r] = cJSON_GetArraySize(ch);
        for (int q = 0; q < c->n_chunks[r]; q++) {
            const cJSON *v = cJSON_GetArrayItem(ch, q);
            if (!cJSON_IsNumber(v) || v->valuedouble < 1 || v->valuedouble > 65536 || v->valuedouble != (int)v->valuedouble) {
                jbad(j, f, "a chunk size is not an integer in [1, 65536]");
                return;
            }
            c->chunk_sizes[r][q] = (int)v->valuedouble;
        }
        snprintf(f, sizeof f, "routes.%s.prefill", tm_route_name(r));
        jnums(j, o, "prefill", f, c->pf[r], TM_ROUTER_NPF, 0, 1e6);
        snprintf(f, sizeof f, "routes.%s.first_token_s", tm_route_name(r));
        c->first[r] = jnum(j, o, "first_token_s", f, -1e3, 1e3);
        snprintf(f, sizeof f, "routes.%s.tpot", tm_route_name(r));
        jnums(j, o, "tpot", f, c->tpot[r], 2, 0, 1e6);
        c->routes |= 1u << r;
    }
    if (j->rc == TM_OK && !c->routes) jbad(j, "routes", "no route");
    jnums(j, root, "handoff", "handoff", c->handoff, 2, 0, 1e6);
    jnums(j, root, "step", "step", c->step, TM_ROUTER_NSTEP, 0, 1e6);
    const cJSON *ld = cJSON_GetObjectItemCaseSensitive(root, "lend");
    if (!cJSON_IsObject(ld)) { jbad(j, "lend", "missing or not an object"); return; }
    c->lend_pre = jnum(j, ld, "prefill", "lend.prefill", 1, 1e3);
    c->lend_dec = jnum(j, ld, "decode", "lend.decode", 1, 1e3);
}

int tm_router_parse(const char *text, size_t len, const char *label, tm_router_key *k, tm_router_costs *c,
                    tm_err *err)
{
    cJSON *root = cJSON_ParseWithLength(text, len);
    if (!root || !cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return tm_errf(err, TM_E_FORMAT, "%s: not a JSON object", label);
    }
    tm_router_key got;
    tm_router_costs tmp;
    memset(&got, 0, sizeof got);
    memset(&tmp, 0, sizeof tmp);
    jrd j = {label, err, TM_OK};
    parse_costs(&j, root, &got, &tmp);
    cJSON_Delete(root);
    if (j.rc != TM_OK) return j.rc;
    *k = got;
    *c = tmp;
    return TM_OK;
}

int tm_router_read(const char *path, const tm_router_key *k, tm_router_costs *c, tm_err *err)
{
    if (!tm_file_exists(path)) return tm_errf(err, TM_E_NOTFOUND, "%s: no such file", path);
    char *text = NULL;
    size_t len = 0;
    int rc = tm_read_file(path, &text, &len, 1 << 20, err);
    if (rc != TM_OK) return rc;
    tm_router_key got;
    tm_router_costs tmp;
    rc = tm_router_parse(text, len, path, &got, &tmp, err);
    free(text);
    if (rc != TM_OK) return rc;
    if (!tm_router_key_equal(&got, k)) {
        const char *field = strcmp(got.cpu, k->cpu) ? "cpu" : got.threads != k->threads ? "threads"
                          : got.prefill_threads != k->prefill_threads ? "prefill_threads"
                          : strcmp(got.cpus, k->cpus) ? "cpus"
                          : strcmp(got.prefill_engine, k->prefill_engine) ? "prefill_engine"
                          : strcmp(got.decode_engine, k->decode_engine) ? "decode_engine"
                          : strcmp(got.prefill_enc, k->prefill_enc) ? "prefill_encoding"
                          : strcmp(got.decode_enc, k->decode_enc) ? "decode_encoding"
                          : strcmp(got.model, k->model) ? "model" : "build";
        return tm_errf(err, TM_E_INVALID, "%s: calibrated for another machine or model (key.%s differs)", path, field);
    }
    *c = tmp;
    return TM_OK;
}

/* ---- the session side ------------------------------------------------------------------- */

/* Routes the session's engines can run at all. */
unsigned tm_router_routes(const tm_session *s)
{
    unsigned m = 0;
    if (s->pre.vt && s->pre.vt->prefill && s->dec.vt && s->dec.vt->decode) m |= 1u << TANDEM_ROUTE_HYBRID;
    if (s->pre.vt && s->pre.vt->prefill && s->pre.vt->decode) m |= 1u << TANDEM_ROUTE_PREFILL_ONLY;
    if (s->dec.vt && s->dec.vt->prefill && s->dec.vt->decode) m |= 1u << TANDEM_ROUTE_DECODE_ONLY;
    return m;
}

void tm_router_session_init(tm_session *s)
{
    tm_router_state *rs = &s->router;
    memset(rs, 0, sizeof *rs);
    tm_router_key k;
    tm_err e = {0};
    char path[4096] = "";
    int rc = tm_router_key_of(s, &k, &e);
    if (rc == TM_OK) rc = tm_router_cache_path(path, sizeof path, NULL, &k, &e);
    if (rc == TM_OK) rc = tm_router_read(path, &k, &rs->c, &e);
    if (rc == TM_OK) {
        rs->c.routes &= tm_router_routes(s);
        rs->calibrated = rs->c.routes != 0;
        snprintf(rs->note, sizeof rs->note, "calibration %.140s", path);
    } else if (rc == TM_E_NOTFOUND) {
        snprintf(rs->note, sizeof rs->note, "no calibration for this machine and model (tandem calibrate MODEL)");
    } else {
        snprintf(rs->note, sizeof rs->note, "calibration ignored: %.130s", e.msg);
    }
    if (s->o.explain) fprintf(stderr, "[route] router: %s\n", rs->note);
}

tandem_route tm_router_pick(const tm_session *s, int n_prompt, int n_out, const tm_router_load *load,
                            tm_router_pred *p)
{
    tm_router_pred tmp;
    if (!p) p = &tmp;
    tm_router_load ld = load ? *load : (tm_router_load){0};
    ld.no_lend = s->o.no_lend;
    ld.no_lend_dec = !s->dec_borrows;
    ld.multi = s->max_seqs > 1;
    ld.max_stall = tandem_stall_bound(&s->o);
    ld.stateful = !s->o.stateless;
    if (s->router.calibrated) {
        tm_router_predict(&s->router.c, n_prompt, n_out, &ld, p);
    } else {
        memset(p, 0, sizeof *p);
        p->n_prompt = n_prompt;
        p->n_out = n_out;
        p->load = ld;
        p->pick = tm_router_rule(s->pre.caps.chunk_sizes, s->pre.caps.n_chunks, n_prompt);
        /* the stall bound without a cost model: no decode-only prefill while streams run */
        if (p->pick == TANDEM_ROUTE_DECODE_ONLY && ld.n_decoding > 0 && ld.max_stall > 0 &&
            (tm_router_routes(s) & (1u << TANDEM_ROUTE_HYBRID)))
            p->pick = TANDEM_ROUTE_HYBRID;
        snprintf(p->note, sizeof p->note, "%s", s->router.note);
    }
    /* a forced route the engines cannot run (tm_session_new refuses one; this guards a route set on a
       live session) leaves the pick to the router */
    if (s->o.route != TANDEM_ROUTE_AUTO && (tm_router_routes(s) & (1u << s->o.route))) {
        p->forced = 1;
        p->pick = s->o.route;
    }
    p->t_pick = tm_now_s();
    return p->pick;
}

void tm_router_explain_pick(FILE *f, const tm_router_pred *p)
{
    const char *why = p->forced ? "forced" : p->calibrated ? "cost model" : "rule";
    if (!p->calibrated) {
        fprintf(f, "[route] %d prompt tokens -> %s (%s; %s)\n", p->n_prompt, tm_route_name(p->pick), why, p->note);
        return;
    }
    fprintf(f, "[route] %d prompt tokens, %d new, %d decoding, %d queued -> %s (%s)\n", p->n_prompt, p->n_out,
            p->load.n_decoding, p->load.n_queued, tm_route_name(p->pick), why);
    for (int i = 0; i < 3; i++) {
        tandem_route r = k_routes[i];
        if (!isfinite(p->own[r])) {
            fprintf(f, "[route]   %-12s n/a on these engines\n", tm_route_name(r));
            continue;
        }
        fprintf(f, "[route]   %-12s TTFT %8.4f s  TPOT %7.3f ms  total %8.4f s  others +%.4f s%s\n", tm_route_name(r),
                p->ttft[r], p->tpot[r] * 1e3, p->own[r], p->others[r],
                r == p->pick ? "  <-"
                : p->ruled_out[r] == TM_ROUTER_STALLS ? "  (ruled out: over the stall bound)"
                : p->ruled_out[r] == TM_ROUTER_HOLDS ? "  (ruled out: holds the prefill worker; several requests)"
                                                     : "");
    }
}

void tm_router_explain_done(FILE *f, const tm_router_pred *p, double t_first, double t_done, int n_gen)
{
    double ttft = n_gen > 0 ? t_first - p->t_pick : 0, total = t_done - p->t_pick;
    double tpot = n_gen > 1 ? (t_done - t_first) / (n_gen - 1) : 0;
    if (!p->calibrated) {
        fprintf(f, "[route] done %s: %d tokens, TTFT %.4f s, TPOT %.3f ms, total %.4f s (no prediction)\n",
                tm_route_name(p->pick), n_gen, ttft, tpot * 1e3, total);
        return;
    }
    tandem_route r = p->pick;
    double pred = p->ttft[r] + (n_gen > 1 ? n_gen - 1 : 0) * p->tpot[r];
    fprintf(f, "[route] done %s: %d tokens; predicted TTFT %.4f s, TPOT %.3f ms, total %.4f s; "
               "actual TTFT %.4f s, TPOT %.3f ms, total %.4f s (actual/predicted %.2f)\n",
            tm_route_name(r), n_gen, p->ttft[r], p->tpot[r] * 1e3, pred, ttft, tpot * 1e3, total,
            pred > 0 ? total / pred : 0);
}

/* ---- calibration --------------------------------------------------------------------------- */

typedef struct cal {
    tm_session *s;
    const tm_router_cal_opts *o;
    tm_router_meas *m;          /* [nm] measurements (medians), capacity cap */
    int nm, cap;
    uint64_t rng;
    int32_t *ids;               /* [max_n] prompt scratch */
    int max_n;
} cal;

static void cal_say(cal *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void cal_say(cal *c, const char *fmt, ...)
{
    if (!c->o->progress) return;
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    c->o->progress(c->o->ud, line);
}

static int cal_push(cal *c, const tm_router_meas *x, tm_err *err)
{
    if (c->nm == c->cap) {
        int cap = c->cap ? 2 * c->cap : 64;
        tm_router_meas *m = realloc(c->m, sizeof *m * (size_t)cap);
        if (!m) return tm_errf(err, TM_E_NOMEM, "calibrate: out of memory");
        c->m = m;
        c->cap = cap;
    }
    c->m[c->nm++] = *x;
    return TM_OK;
}

static void cal_ids(cal *c, int n)
{
    int V = c->s->rm->decode->V;
    for (int i = 0; i < n; i++) {
        c->rng = c->rng * 6364136223846793005ULL + 1442695040888963407ULL;
        c->ids[i] = (int32_t)((c->rng >> 33) % (uint64_t)V);
    }
}

static int cal_request(cal *c, tandem_route r, int n, int gen, tandem_stats *st, tm_err *err)
{
    tandem_request q;
    tandem_request_default(&q);
    q.prompt_ids = c->ids;
    q.n_prompt_ids = (size_t)n;
    q.max_tokens = gen;
    q.temperature = 0;
    q.ignore_eos = 1;
    c->s->o.route = r; /* the session is idle: the prefill worker reads it after submit's lock */
    return tm_session_generate(c->s, &q, NULL, NULL, st, err);
}

/* Requests through the scheduler, every route interleaved at each length;
 * a route far behind the best (3x) stops being measured once it has four
 * distinct chunk plans, and is extrapolated by its fit beyond. */
static int cal_requests(cal *c, const int *lens, int nl, int reps, int gen, unsigned avail, tm_err *err)
{
    tm_session *s = c->s;
    int rc = TM_OK;
    tandem_stats st;
    cal_ids(c, lens[0]);
    for (int i = 0; i < 3 && rc == TM_OK; i++) /* warm-up: touch every engine's weights once */
        if (avail & (1u << k_routes[i])) rc = cal_request(c, k_routes[i], lens[0], 2, &st, err);
    double *v = malloc(sizeof(double) * 12 * (size_t)reps);
    if (!v) return tm_errf(err, TM_E_NOMEM, "calibrate: out of memory");
    unsigned active = avail;
    int distinct[4] = {0};
    double last_pad[4] = {-1, -1, -1, -1};
    for (int li = 0; li < nl && rc == TM_OK; li++) {
        int n = lens[li];
        cal_ids(c, n);
        double *tp[3], *th[3], *tf[3], *tt[3];
        for (int i = 0; i < 3; i++) {
            tp[i] = v + (size_t)reps * (4 * i + 0);
            th[i] = v + (size_t)reps * (4 * i + 1);
            tf[i] = v + (size_t)reps * (4 * i + 2);
            tt[i] = v + (size_t)reps * (4 * i + 3);
        }
        for (int rep = 0; rep < reps && rc == TM_OK; rep++)
            for (int i = 0; i < 3 && rc == TM_OK; i++) {
                if (!(active & (1u << k_routes[i]))) continue;
                if ((rc = cal_request(c, k_routes[i], n, gen, &st, err)) != TM_OK) break;
                tp[i][rep] = st.t_prefill;
                th[i][rep] = st.t_handoff;
                tf[i][rep] = st.ttft - st.t_prefill - st.t_handoff;
                tt[i][rep] = st.n_generated > 1 ? st.t_decode / (st.n_generated - 1) : NAN;
            }
        if (rc != TM_OK) break;
        double own[3], best = INFINITY;
        for (int i = 0; i < 3; i++) {
            own[i] = INFINITY;
            tandem_route r = k_routes[i];
            if (!(active & (1u << r))) continue;
            tm_router_meas x = {.kind = TM_ROUTER_MEAS_PREFILL, .route = r, .n = n};
            x.t = median(tp[i], reps);
            x.t_handoff = median(th[i], reps);
            x.t_first = median(tf[i], reps);
            tm_router_meas y = {.kind = TM_ROUTER_MEAS_TOKEN, .route = r, .ctx = n + 0.5 * gen, .t = median(tt[i], reps)};
            if ((rc = cal_push(c, &x, err)) != TM_OK || (rc = cal_push(c, &y, err)) != TM_OK) break;
            own[i] = x.t + x.t_handoff + x.t_first + (gen - 1) * (isfinite(y.t) ? y.t : 0);
            if (own[i] < best) best = own[i];
            cal_say(c, "%-12s n=%5d: prefill %8.4f s  hand-off %7.3f ms  first token +%6.3f ms  TPOT %7.3f ms",
                    tm_route_name(r), n, x.t, x.t_handoff * 1e3, x.t_first * 1e3, y.t * 1e3);
        }
        for (int i = 0; i < 3 && rc == TM_OK && li + 1 < nl; i++) {
            tandem_route r = k_routes[i];
            if (!(active & (1u << r))) continue;
            tm_engine_caps caps;
            tm_route_chunk_caps(s, r, &caps);
            double f[TM_ROUTER_NPF];
            tm_router_prefill_features(caps.chunk_sizes, caps.n_chunks, n, f);
            if (f[2] != last_pad[r]) {
                distinct[r]++;
                last_pad[r] = f[2];
            }
            if (own[i] > 3 * best && distinct[r] >= 4) {
                active &= ~(1u << r);
                cal_say(c, "%-12s stops at n=%d (%.1fx the best route); longer prompts are extrapolated",
                        tm_route_name(r), n, own[i] / best);
            }
        }
    }
    free(v);
    return rc;
}

/* Zero a sequence's pages (KV contents do not change the timing, but
 * uninitialised memory may hold NaNs and denormals). */
static void zero_seq(tm_kv_cache *kv, const tm_kv_seq *q)
{
    const tm_kv_cache_opts *o = tm_kv_cache_info(kv);
    size_t blk = tm_kv_block_bytes(o->dtype, o->page_size, o->head_dim);
    for (int p = 0; p < q->n_pages; p++)
        for (int l = 0; l < o->n_layers; l++)
            for (int h = 0; h < o->n_kv_heads; h++) {
                memset(tm_kv_page_k(kv, q->pages[p], l, h), 0, blk);
                memset(tm_kv_page_v(kv, q->pages[p], l, h), 0, blk);
            }
}

/* Median seconds of one decode step of B sequences at context ctx (after a
 * warm-up step), on engine e with `pool`. */
static int time_steps(cal *c, tm_bound_engine *e, struct tm_pool *pool, int B, int ctx, int steps, float *logits,
                      double *t_step, tm_err *err)
{
    tm_session *s = c->s;
    tm_kv_seq seqs[TM_MAX_BATCH];
    tm_kv_seq *sp[TM_MAX_BATCH];
    int32_t toks[TM_MAX_BATCH];
    int pos[TM_MAX_BATCH];
    double t[64];
    memset(seqs, 0, sizeof seqs);
    int rc = TM_OK;
    for (int b = 0; b < B && rc == TM_OK; b++) {
        rc = tm_kv_seq_reserve(s->kv, &seqs[b], ctx + steps + 2, err);
        if (rc != TM_OK) break;
        zero_seq(s->kv, &seqs[b]);
        seqs[b].n_tokens = ctx;
        seqs[b].owner = TM_KV_OWNER_DECODE;
        sp[b] = &seqs[b];
    }
    cal_ids(c, B);
    for (int i = 0; rc == TM_OK && i <= steps; i++) {
        for (int b = 0; b < B; b++) {
            toks[b] = c->ids[b];
            pos[b] = ctx + i;
        }
        tm_decode_args a = {.B = B, .tokens = toks, .pos = pos, .kv = s->kv, .seqs = sp, .logits = logits, .pool = pool,
                            .alone = tm_session_alone(s, pool)};
        double t0 = tm_now_s();
        rc = e->vt->decode(e->ctx, &a, err);
        if (i > 0) t[i - 1] = tm_now_s() - t0;
    }
    for (int b = 0; b < B; b++) tm_kv_seq_release(s->kv, &seqs[b]);
    if (rc == TM_OK) *t_step = median(t, steps);
    return rc;
}

/* Median seconds to prefill n tokens along the hybrid route with `pool`. */
static int time_prefill(cal *c, struct tm_pool *pool, int n, int reps, double *out, tm_err *err)
{
    tm_session *s = c->s;
    double t[16];
    int rc = TM_OK;
    cal_ids(c, n);
    for (int r = 0; r < reps && rc == TM_OK; r++) {
        tm_kv_seq seq = {0}, sseq = {0};
        double tp = 0, th = 0;
        rc = tm_prefill_route(s, TANDEM_ROUTE_HYBRID, c->ids, n, &seq, &sseq, pool, s->logits, NULL, &tp, &th, NULL, err);
        tm_kv_seq_release(s->kv, &seq);
        tm_kv_seq_release(s->stage, &sseq);
        t[r] = tp;
    }
    if (rc == TM_OK) *out = median(t, reps);
    return rc;
}

/* A prefill that runs over and over on the prefill side's own cores while
 * decode steps are timed on theirs: what a running stream meets when a prompt
 * arrives (the two sides share the memory bandwidth and the caches). Its own
 * ids and logits; the staging cache is its alone (time_steps reads none). */
typedef struct busy_prefill {
    cal *c;
    int32_t *ids;
    float *logits;
    int n;
    atomic_int started, stop;
    int rc;
    tm_err err;
} busy_prefill;

static void *busy_main(void *arg)
{
    busy_prefill *b = arg;
    tm_session *s = b->c->s;
    tm_pool_pin_caller(s->pool_pre, NULL);
    while (!atomic_load(&b->stop) && b->rc == TM_OK) {
        tm_kv_seq seq = {0}, sseq = {0};
        double tp = 0, th = 0;
        atomic_store(&b->started, 1);
        b->rc = tm_prefill_route(s, TANDEM_ROUTE_HYBRID, b->ids, b->n, &seq, &sseq, s->pool_pre, b->logits, NULL, &tp,
                                 &th, NULL, &b->err);
        tm_kv_seq_release(s->kv, &seq);
        tm_kv_seq_release(s->stage, &sseq);
    }
    atomic_store(&b->started, 1);
    return NULL;
}

/* Decode steps of B sequences on the decode side's own cores while a prefill
 * runs on the prefill side's (busy: 1), else with the other side idle. */
static int time_steps_busy(cal *c, int busy, int B, int ctx, int steps, float *logits, double *t, tm_err *err)
{
    tm_session *s = c->s;
    busy_prefill b = {.c = c, .n = s->max_ctx - 2 < 256 ? s->max_ctx - 2 : 256};
    pthread_t th;
    int started = 0;
    if (busy) {
        b.ids = malloc(sizeof(int32_t) * (size_t)b.n);
        b.logits = malloc(sizeof(float) * (size_t)s->rm->decode->V);
        if (!b.ids || !b.logits) {
            free(b.ids);
            free(b.logits);
            return tm_errf(err, TM_E_NOMEM, "calibrate: out of memory");
        }
        cal_ids(c, b.n);
        memcpy(b.ids, c->ids, sizeof(int32_t) * (size_t)b.n);
        started = pthread_create(&th, NULL, busy_main, &b) == 0;
        while (started && !atomic_load(&b.started)) sched_yield();
    }
    tm_pool_pin_caller(s->pool_dec, NULL);
    int rc = time_steps(c, &s->dec, s->pool_dec, B, ctx, steps, logits, t, err);
    if (started) {
        atomic_store(&b.stop, 1);
        pthread_join(th, NULL);
        if (rc == TM_OK && b.rc != TM_OK) {
            if (err) *err = b.err;
            rc = b.rc;
        }
    }
    free(b.ids);
    free(b.logits);
    return rc;
}

typedef struct step_job {
    cal *c;
    unsigned avail;
    int quick;
    int rc;
    tm_err err;
} step_job;

/* The decode-step and lending measurements, on a thread pinned like the
 * scheduler's workers (the caller of a pool is its worker 0). */
static void *step_main(void *arg)
{
    step_job *j = arg;
    cal *c = j->c;
    tm_session *s = c->s;
    tm_err *err = &j->err;
    int rc = TM_OK, steps = j->quick ? 4 : 8;
    float *logits = malloc(sizeof(float) * (size_t)tm_session_max_batch(s) * (size_t)s->rm->decode->V);
    if (!logits) {
        j->rc = tm_errf(err, TM_E_NOMEM, "calibrate: out of memory");
        return NULL;
    }
    int ctx_hi = s->max_ctx - steps - 4 < 1024 ? s->max_ctx - steps - 4 : 1024;
    int ctxs[2] = {ctx_hi < 64 ? ctx_hi : 64, ctx_hi}, n_ctx = ctx_hi > 64 ? 2 : 1;
    if (j->avail & (1u << TANDEM_ROUTE_HYBRID | 1u << TANDEM_ROUTE_DECODE_ONLY)) {
        tm_pool_pin_caller(s->pool_all_dec, NULL);
        int maxb = tm_session_max_batch(s);
        for (int ci = 0; ci < n_ctx && rc == TM_OK; ci++)
            for (int B = 1; B <= maxb && rc == TM_OK; B *= 2) {
                double t = 0;
                if ((rc = time_steps(c, &s->dec, s->pool_all_dec, B, ctxs[ci], steps, logits, &t, err)) != TM_OK) break;
                tm_router_meas x = {.kind = TM_ROUTER_MEAS_STEP, .B = B, .ctx = (double)B * (ctxs[ci] + 0.5 * steps),
                                    .t = t};
                rc = cal_push(c, &x, err);
                cal_say(c, "decode engine step: B=%d ctx=%5d: %7.3f ms", B, ctxs[ci], t * 1e3);
            }
    }
    /* lending: each side on its own cores against every core */
    int own_pre = tm_pool_size(s->pool_pre), all_pre = tm_pool_size(s->pool_all_pre);
    int own_dec = tm_pool_size(s->pool_dec), all_dec = tm_pool_size(s->pool_all_dec);
    if (rc == TM_OK && own_pre < all_pre) {
        int n = s->max_ctx - 2 < 256 ? s->max_ctx - 2 : 256, reps = j->quick ? 1 : 3;
        double t_own = 0, t_all = 0;
        tm_pool_pin_caller(s->pool_pre, NULL);
        rc = time_prefill(c, s->pool_pre, n, reps, &t_own, err);
        if (rc == TM_OK) rc = time_prefill(c, s->pool_all_pre, n, reps, &t_all, err);
        if (rc == TM_OK && t_all > 0) {
            tm_router_meas x = {.kind = TM_ROUTER_MEAS_LEND, .side = 0, .t = t_own / t_all};
            rc = cal_push(c, &x, err);
            cal_say(c, "prefill side: %d cores %.4f s, %d cores %.4f s (x%.2f)", own_pre, t_own, all_pre, t_all,
                    t_own / t_all);
        }
    }
    /* the decode side on its own cores while a prefill runs on the others,
     * against every core with nothing else running: what a stream loses when a
     * prompt arrives (the stall bound, sched.c invariant 5, and the router's
     * slowdown while requests are queued); the worse of one sequence and four */
    if (rc == TM_OK && own_dec < all_dec && (j->avail & (1u << TANDEM_ROUTE_HYBRID | 1u << TANDEM_ROUTE_DECODE_ONLY))) {
        int busy = (j->avail & (1u << TANDEM_ROUTE_HYBRID)) != 0 && own_pre > 0;
        int maxb = s->dec.caps.max_batch > 0 && s->dec.caps.max_batch < 4 ? s->dec.caps.max_batch : 4;
        if (maxb > s->max_seqs) maxb = s->max_seqs;
        double worst = 0;
        for (int bi = 0; bi < (maxb > 1 ? 2 : 1) && rc == TM_OK; bi++) {
            int B = bi ? maxb : 1;
            double t_own = 0, t_all = 0;
            tm_pool_pin_caller(s->pool_all_dec, NULL);
            rc = time_steps(c, &s->dec, s->pool_all_dec, B, ctxs[0], steps, logits, &t_all, err);
            if (rc == TM_OK) rc = time_steps_busy(c, busy, B, ctxs[0], steps, logits, &t_own, err);
            if (rc == TM_OK && t_all > 0) {
                if (t_own / t_all > worst) worst = t_own / t_all;
                cal_say(c, "decode side:  B=%d: %d cores%s %.3f ms, %d cores %.3f ms (x%.2f)", B, own_dec,
                        busy ? " beside a prefill" : "", t_own * 1e3, all_dec, t_all * 1e3, t_own / t_all);
            }
        }
        if (rc == TM_OK && worst > 0) {
            tm_router_meas x = {.kind = TM_ROUTER_MEAS_LEND, .side = 1, .t = worst};
            rc = cal_push(c, &x, err);
        }
    }
    free(logits);
    j->rc = rc;
    return NULL;
}

static int cmp_int(const void *a, const void *b) { return *(const int *)a - *(const int *)b; }

int tm_router_calibrate(tm_session *s, const tm_router_cal_opts *o, tm_router_costs *out, tm_err *err)
{
    static const int full[] = {16, 64, 128, 256, 384, 512, 1024, 2048}, quick[] = {32, 128, 256, 512, 1024};
    tm_router_cal_opts def = {0};
    if (!o) o = &def;
    int gen = o->gen > 0 ? (o->gen > 1 ? o->gen : 2) : o->quick ? 8 : 16; /* >= 2: a time per token */
    int reps = o->reps > 0 ? (o->reps < 16 ? o->reps : 16) : o->quick ? 1 : 3;
    const int *src = o->lens ? o->lens : o->quick ? quick : full;
    int nsrc = o->lens ? o->n_lens : o->quick ? 5 : 8;
    /* lengths that fit the context, sorted, unique; the longest that fits when some do not */
    int lens[32], nl = 0, cap_n = s->max_ctx - gen - 1, clipped = 0;
    for (int i = 0; i < nsrc && nl < 31; i++) {
        if (src[i] < 1) return tm_errf(err, TM_E_INVALID, "calibrate: prompt length %d", src[i]);
        if (src[i] <= cap_n) lens[nl++] = src[i];
        else clipped = 1;
    }
    if (clipped && cap_n >= 1) lens[nl++] = cap_n;
    if (nl == 0) return tm_errf(err, TM_E_INVALID, "calibrate: no prompt length fits the context of %d", s->max_ctx);
    qsort(lens, (size_t)nl, sizeof(int), cmp_int);
    int k = 1;
    for (int i = 1; i < nl; i++)
        if (lens[i] != lens[k - 1]) lens[k++] = lens[i];
    nl = k;

    unsigned avail = tm_router_routes(s);
    tm_router_costs c;
    memset(&c, 0, sizeof c);
    for (int i = 0; i < 3; i++) {
        tandem_route r = k_routes[i];
        tm_engine_caps caps;
        tm_route_chunk_caps(s, r, &caps);
        c.n_chunks[r] = caps.n_chunks;
        memcpy(c.chunk_sizes[r], caps.chunk_sizes, sizeof c.chunk_sizes[r]);
    }
    cal cx = {.s = s, .o = o, .rng = 0x9e3779b97f4a7c15ULL, .max_n = lens[nl - 1] > 256 ? lens[nl - 1] : 256};
    cx.ids = malloc(sizeof(int32_t) * (size_t)cx.max_n);
    if (!cx.ids) return tm_errf(err, TM_E_NOMEM, "calibrate: out of memory");
    tandem_session_opts saved = s->o;
    int saved_borrows = s->dec_borrows;
    s->o.explain = 0;
    /* the costs are an idle session's, one request at a time: each side on
     * every core (the decode side too, whatever the stall bound says); the
     * lending factors measured below price a busy other side */
    s->dec_borrows = !s->o.no_lend;
    cal_say(&cx, "calibrating %s with %s prefill, %s decode; %d lengths x %d reps, %d tokens each",
            s->rm->path, s->pre.caps.name, s->dec.caps.name, nl, reps, gen);
    int rc = cal_requests(&cx, lens, nl, reps, gen, avail, err);
    s->o = saved;
    s->dec_borrows = saved_borrows;
    if (rc == TM_OK) {
        step_job j = {.c = &cx, .avail = avail, .quick = o->quick};
        pthread_t th;
        if (pthread_create(&th, NULL, step_main, &j) != 0) rc = tm_errf(err, TM_E_NOMEM, "calibrate: cannot start a thread");
        else {
            pthread_join(th, NULL);
            if ((rc = j.rc) != TM_OK && err) *err = j.err;
        }
    }
    if (rc == TM_OK) rc = tm_router_fit(&c, cx.m, cx.nm, err);
    if (rc == TM_OK) {
        c.routes &= avail;
        /* how well the fit reproduces the measured requests */
        for (int i = 0; i < 3; i++) {
            tandem_route r = k_routes[i];
            double worst = 0;
            int at = 0;
            for (int q = 0; q < cx.nm; q++) {
                const tm_router_meas *x = &cx.m[q];
                if (x->kind != TM_ROUTER_MEAS_PREFILL || x->route != (int)r) continue;
                double pr = tm_router_prefill_time(&c, r, x->n);
                double e = x->t > 0 ? fabs(pr - x->t) / x->t : 0;
                if (e > worst) { worst = e; at = x->n; }
            }
            if (c.routes & (1u << r))
                cal_say(&cx, "fit %-12s prefill: worst relative error %.1f%% (n=%d)", tm_route_name(r), 100 * worst, at);
        }
        *out = c;
    }
    free(cx.ids);
    free(cx.m);
    return rc;
}
