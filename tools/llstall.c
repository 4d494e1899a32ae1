/* tools/llstall.c: llama.cpp's decode stall in the scenario of `tandem bench
 * --stall` (src/cli/cmd_bench_sched.c), scheduled the way llama-server
 * schedules it, over libllama's C API with token ids (no vocabulary needed).
 * `tandem bench --stall N --peer llama.cpp` runs it once per rep and parses
 * its RESULT line; build it with tools/llstall.sh.
 *
 *   llstall MODEL.gguf THREADS STREAMS PROMPT [key=value ...]
 *     keys (defaults): stream_prompt=64 settle=8 quiet_s=1.5 n_batch=2048
 *                      n_ubatch=512 n_ctx=8192 after=4 seed=5 timeline=0
 *
 * The server's loop (tools/server/server-context.cpp, update_slots), which
 * this program reproduces on one llama_context (n_seq_max = STREAMS + 1,
 * unified KV, f16 K/V, flash attention auto, n_threads = n_threads_batch =
 * THREADS, n_batch/n_ubatch as given: the server's defaults are 2048/512):
 *
 *   step:  batch = one token of every generating sequence (output on)
 *                + prompt tokens of sequences still prefilling, in sequence
 *                  order, until the batch holds n_batch tokens (output on
 *                  the last prompt token only)
 *          llama_decode(batch)          (the library splits it into n_ubatch)
 *          argmax of every output -> the next token; a sequence whose prompt
 *          completed gets its first token and generates from the next step
 *
 * Timeline (identical to tandem's stall test):
 *
 *   t=0   STREAMS random prompts of stream_prompt tokens arrive (all pending)
 *   q0    every stream has `settle` tokens        -> quiet window [q0, q1)
 *   q1    = q0 + quiet_s: a PROMPT-token prompt arrives; the server takes it
 *         at its next step, as tandem's scheduler does
 *   a1    its first token                         -> during window [q1, a1)
 *   then  `after` steps with all STREAMS+1 sequences decoding (reported
 *         separately; not part of either window)
 *
 * Metrics, as in cmd_bench_sched.c: inter-token gaps of the running streams
 * whose later token falls inside a window; p50/p99 by nearest rank
 * (index (int)(p (n-1) + 0.5) of the sorted gaps); ratio = p50 during / p50
 * quiet; prefill_s = a1 - q1. A token's time is taken right after the argmax
 * that picks it. foreign = CPU time used by other processes during [q0, a1]
 * as a share of the wall time (the machine is shared; not retried).
 *
 * Output, one line on stdout:
 *   RESULT model=M threads=T streams=S prompt=P n_batch=B n_ubatch=U n_seq_max=S+1
 *     kv_unified=1 quiet_p50_ms=.. quiet_p99_ms=.. during_p50_ms=.. during_p99_ms=..
 *     ratio=.. prefill_s=.. n_quiet=.. n_during=.. after_p50_ms=.. foreign=..%
 * and with timeline=1, one line per gap of both windows (the chart's timeline;
 * t = the later token's time relative to q1, seconds):
 *   RESULT_GAP stream=I t=.. ms=..
 *
 * Libraries: set LLB_BACKEND_DIR to the folder with libggml-cpu-*.so when the
 * ggml build loads its CPU backends dynamically (node-llama-cpp's prebuilt). */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ggml-backend.h"
#include "llama.h"
#include "cli/bench_clock.h"

#define MAX_SEQ 8
#define MAX_TOK 4096 /* recorded token times per sequence (as tandem's test) */






typedef enum { SEQ_IDLE, SEQ_PREFILL, SEQ_GENERATE } seq_state;

typedef struct seq {
    seq_state state;
    llama_token *prompt; /* [n_prompt] */
    int n_prompt, n_done; /* prompt tokens, of which decoded */
    llama_pos pos;       /* position of the next token fed */
    llama_token last;    /* the last sampled token (fed next step) */
    int out;             /* batch index of this sequence's output, -1 none */
    double t[MAX_TOK];   /* times of its sampled tokens [n] */
    int n;
} seq;

typedef struct sim {
    struct llama_context *ctx;
    struct llama_batch batch; /* capacity n_batch tokens */
    int n_batch, n_vocab, n_seq;
    seq s[MAX_SEQ];
} sim;

static void batch_add(struct llama_batch *b, llama_token tok, llama_pos pos, llama_seq_id id, int out)
{
    int i = b->n_tokens++;
    b->token[i] = tok;
    b->pos[i] = pos;
    b->n_seq_id[i] = 1;
    b->seq_id[i][0] = id;
    b->logits[i] = (int8_t)out;
}

static llama_token argmax(struct llama_context *ctx, int i, int n_vocab)
{
    const float *l = llama_get_logits_ith(ctx, i); /* [n_vocab] */
    int best = 0;
    for (int k = 1; k < n_vocab; k++)
        if (l[k] > l[best]) best = k;
    return best;
}

/* One server step (see the design block). Returns 0, or -1 on a decode error. */
static int sim_step(sim *m)
{
    struct llama_batch *b = &m->batch;
    b->n_tokens = 0;
    for (int i = 0; i < m->n_seq; i++) {
        seq *q = &m->s[i];
        q->out = -1;
        if (q->state != SEQ_GENERATE) continue;
        q->out = b->n_tokens;
        batch_add(b, q->last, q->pos++, i, 1);
    }
    for (int i = 0; i < m->n_seq && b->n_tokens < m->n_batch; i++) {
        seq *q = &m->s[i];
        if (q->state != SEQ_PREFILL) continue;
        while (q->n_done < q->n_prompt && b->n_tokens < m->n_batch) {
            int last = q->n_done + 1 == q->n_prompt;
            if (last) q->out = b->n_tokens;
            batch_add(b, q->prompt[q->n_done++], q->pos++, i, last);
        }
    }
    if (b->n_tokens == 0) return 0;
    int rc = llama_decode(m->ctx, *b);
    if (rc != 0) {
        fprintf(stderr, "llstall: llama_decode failed (%d) on a %d-token batch\n", rc, b->n_tokens);
        return -1;
    }
    for (int i = 0; i < m->n_seq; i++) {
        seq *q = &m->s[i];
        if (q->out < 0) continue;
        q->last = argmax(m->ctx, q->out, m->n_vocab);
        if (q->n < MAX_TOK) q->t[q->n++] = tm_now_s();
        q->state = SEQ_GENERATE;
    }
    return 0;
}

static void seq_arrive(sim *m, int i, int n_prompt, unsigned *seed)
{
    seq *q = &m->s[i];
    q->prompt = malloc(sizeof(llama_token) * (size_t)n_prompt);
    if (!q->prompt) {
        fprintf(stderr, "llstall: out of memory\n");
        exit(1);
    }
    for (int k = 0; k < n_prompt; k++) q->prompt[k] = (llama_token)(rand_r(seed) % (unsigned)m->n_vocab);
    q->n_prompt = n_prompt;
    q->n_done = 0;
    q->pos = 0;
    q->state = SEQ_PREFILL;
}

/* gaps of streams [0, n) whose later token falls in [t0, t1) -> g; returns count */
static int gaps_in(const sim *m, int n, double t0, double t1, double *g)
{
    int k = 0;
    for (int i = 0; i < n; i++)
        for (int j = 1; j < m->s[i].n; j++) {
            double t = m->s[i].t[j];
            if (t >= t0 && t < t1) g[k++] = t - m->s[i].t[j - 1];
        }
    return k;
}

static int opt_i(int argc, char **argv, const char *key, int def)
{
    size_t n = strlen(key);
    for (int i = 5; i < argc; i++)
        if (!strncmp(argv[i], key, n) && argv[i][n] == '=') return atoi(argv[i] + n + 1);
    return def;
}

static double opt_d(int argc, char **argv, const char *key, double def)
{
    size_t n = strlen(key);
    for (int i = 5; i < argc; i++)
        if (!strncmp(argv[i], key, n) && argv[i][n] == '=') return strtod(argv[i] + n + 1, NULL);
    return def;
}

int main(int argc, char **argv)
{
    if (argc < 5) {
        fprintf(stderr, "usage: llstall MODEL.gguf THREADS STREAMS PROMPT [stream_prompt=64 settle=8 quiet_s=1.5 "
                        "n_batch=2048 n_ubatch=512 n_ctx=8192 after=4 seed=5 timeline=0]\n");
        return 2;
    }
    const char *path = argv[1], *mname = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    int threads = atoi(argv[2]), streams = atoi(argv[3]), P = atoi(argv[4]);
    int sp = opt_i(argc, argv, "stream_prompt", 64), settle = opt_i(argc, argv, "settle", 8);
    int n_batch = opt_i(argc, argv, "n_batch", 2048), n_ubatch = opt_i(argc, argv, "n_ubatch", 512);
    int n_ctx = opt_i(argc, argv, "n_ctx", 8192), after = opt_i(argc, argv, "after", 4);
    unsigned seed = (unsigned)opt_i(argc, argv, "seed", 5);
    int timeline = opt_i(argc, argv, "timeline", 0);
    double quiet_s = opt_d(argc, argv, "quiet_s", 1.5);
    if (threads < 1 || streams < 1 || streams + 1 > MAX_SEQ || P < 1 || sp < 1 || settle < 2 || n_batch < streams + 1 ||
        n_ubatch < 1 || quiet_s <= 0) {
        fprintf(stderr, "llstall: bad arguments (threads >= 1, 1 <= streams <= %d, prompt >= 1, settle >= 2, "
                        "n_batch > streams)\n", MAX_SEQ - 1);
        return 2;
    }

    const char *bdir = getenv("LLB_BACKEND_DIR");
    if (bdir) ggml_backend_load_all_from_path(bdir);
    else ggml_backend_load_all();
    llama_backend_init();
    struct llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    struct llama_model *model = llama_model_load_from_file(path, mp);
    if (!model) {
        fprintf(stderr, "llstall: %s: cannot load\n", path);
        return 1;
    }
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = (uint32_t)n_ctx;
    cp.n_batch = (uint32_t)n_batch;
    cp.n_ubatch = (uint32_t)n_ubatch;
    cp.n_seq_max = (uint32_t)(streams + 1);
    cp.kv_unified = true;
    cp.n_threads = threads;
    cp.n_threads_batch = threads;
    cp.type_k = GGML_TYPE_F16;
    cp.type_v = GGML_TYPE_F16;
    cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_AUTO;
    cp.no_perf = true;
    sim *m = calloc(1, sizeof *m);
    m->ctx = m ? llama_init_from_model(model, cp) : NULL;
    if (!m || !m->ctx) {
        fprintf(stderr, "llstall: cannot create the context (n_ctx %d, n_seq_max %d)\n", n_ctx, streams + 1);
        return 1;
    }
    m->batch = llama_batch_init(n_batch, 0, 1);
    m->n_batch = n_batch;
    m->n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
    m->n_seq = streams + 1;

    /* t=0: the streams arrive; decode until each has `settle` tokens */
    for (int i = 0; i < streams; i++) seq_arrive(m, i, sp, &seed);
    int rc = 0;
    for (;;) {
        int ready = 1;
        for (int i = 0; i < streams; i++) ready &= m->s[i].n >= settle;
        if (ready) break;
        if ((rc = sim_step(m))) break;
    }
    double q0 = tm_now_s(), q1 = q0 + quiet_s, a1 = q1, b0 = bc_sys_busy_s(), o0 = bc_own_cpu_s();
    /* quiet window; the prompt arrives at q1 and joins at the next step */
    while (rc == 0 && tm_now_s() < q1) rc = sim_step(m);
    seq *nq = &m->s[streams];
    if (rc == 0) seq_arrive(m, streams, P, &seed);
    while (rc == 0 && nq->n == 0) rc = sim_step(m);
    if (rc == 0) a1 = nq->t[0];
    double foreign = (bc_sys_busy_s() - b0) - (bc_own_cpu_s() - o0), wall = tm_now_s() - q0;
    int n0 = nq->n;
    for (int k = 0; rc == 0 && k < after; k++) rc = sim_step(m);
    for (int i = 0; i < m->n_seq; i++)
        if (m->s[i].n >= MAX_TOK) {
            fprintf(stderr, "llstall: a stream ran past %d tokens (quiet_s too long)\n", MAX_TOK);
            rc = -1;
        }

    if (rc == 0) {
        double *g = malloc(sizeof(double) * MAX_TOK * (size_t)m->n_seq);
        int nqt = gaps_in(m, streams, q0, q1, g);
        double qp50 = bc_pct(g, nqt, 0.5), qp99 = bc_pct(g, nqt, 0.99);
        int nd = gaps_in(m, streams, q1, a1, g);
        double dp50 = bc_pct(g, nd, 0.5), dp99 = bc_pct(g, nd, 0.99);
        /* after: gaps of every sequence (the new one included) past its first token */
        int na = 0;
        for (int i = 0; i < m->n_seq; i++)
            for (int j = i == streams ? n0 : 1; j < m->s[i].n; j++)
                if (m->s[i].t[j] > a1) g[na++] = m->s[i].t[j] - m->s[i].t[j - 1];
        double ap50 = bc_pct(g, na, 0.5);
        free(g);
        printf("RESULT model=%s threads=%d streams=%d prompt=%d n_batch=%d n_ubatch=%d n_seq_max=%d kv_unified=1 "
               "quiet_p50_ms=%.3f quiet_p99_ms=%.3f during_p50_ms=%.3f during_p99_ms=%.3f ratio=%.3f prefill_s=%.3f "
               "n_quiet=%d n_during=%d after_p50_ms=%.3f foreign=%.1f%%\n",
               mname, threads, streams, P, n_batch, n_ubatch, streams + 1, qp50 * 1e3, qp99 * 1e3, dp50 * 1e3,
               dp99 * 1e3, qp50 > 0 ? dp50 / qp50 : 0, a1 - q1, nqt, nd, ap50 * 1e3,
               wall > 0 ? 100 * foreign / wall : 0);
        for (int i = 0; timeline && i < streams; i++)
            for (int j = 1; j < m->s[i].n; j++) {
                double t = m->s[i].t[j];
                if (t >= q0 && t < a1)
                    printf("RESULT_GAP stream=%d t=%.4f ms=%.3f\n", i, t - q1, (t - m->s[i].t[j - 1]) * 1e3);
            }
        fflush(stdout);
        fprintf(stderr, "llstall: %d streams, a %d-token prompt arrives: TPOT p50 %.1f ms quiet, %.1f ms during "
                        "(%.2fx; its TTFT %.2f s)\n", streams, P, qp50 * 1e3, dp50 * 1e3, qp50 > 0 ? dp50 / qp50 : 0,
                a1 - q1);
    }
    for (int i = 0; i < m->n_seq; i++) free(m->s[i].prompt);
    llama_batch_free(m->batch);
    llama_free(m->ctx);
    free(m);
    llama_model_free(model);
    return rc != 0;
}
