/* runtime/bridge.h: the KV bridge, from the prefill engine to the decode engine.
 *
 * Design block: the hand-off
 * --------------------------
 * Two modes, chosen per request by the runtime from the engines' caps:
 *
 *  stateful   prefill writes its chunk K/V straight into the decode cache's
 *             pages (same memory, same dtype and layout): the hand-off is a
 *             change of owner, no bytes move (zero copy).
 *  stateless  prefill writes into a prefill-private staging cache (its own
 *             dtype and page size). As each layer of the LAST chunk finishes
 *             (and, for earlier chunks, as soon as the chunk is done), the
 *             bridge converts dtype (f32/bf16/f16 -> the decode dtype: bf16,
 *             f16, or int8, quantizing each (token, kv head) row of K and of
 *             V with its own scale) and scatters rows into the decode pages,
 *             layer by layer, on the bridge thread, so that the copy
 *             overlaps the later layers.
 *
 *   prefill layer:   0     1     2   ...  L-1
 *   bridge copy:           0     1   ...  L-2   L-1   <- only the last layer's
 *                                                     copy is on the critical path
 *
 * Invariants
 *  1. The bridge reads staging pages only after prefill reported the layer
 *     done (on_layer) and writes decode pages the decode side does not own yet
 *     (the sequence's owner is still PREFILL until tm_bridge_finish).
 *  2. tm_bridge_finish waits for every queued layer, then flips the sequence's
 *     owner to DECODE: after it returns, decode may read all positions.
 *  3. Positions are copied exactly once; dtype conversion rounds to nearest
 *     even (int8: tm_kv_quant_row, the same rows prefill would have written
 *     from those bf16 values). A same-dtype copy moves bytes unchanged.
 *
 * Transitions
 *   | from                  | to          | function              |
 *   | staging layer l done  | l queued    | tm_bridge_layer_done  |
 *   | queued                | copied      | bridge thread (copy_layer) |
 *   | all copied            | DECODE owns | tm_bridge_finish      |
 */
#ifndef TM_RUNTIME_BRIDGE_H
#define TM_RUNTIME_BRIDGE_H

#include "runtime/kvcache.h"

/* tm_kv_copy_layer: copy positions [p0, p1) of one layer from (src, ss) to
 * (dst, ds), converting dtype and page layout. Both caches must agree on Hk
 * and Dh. Single-threaded; the bridge calls it per layer. */
void tm_kv_copy_layer(const tm_kv_cache *src, const tm_kv_seq *ss, tm_kv_cache *dst,
                      const tm_kv_seq *ds, int layer, int p0, int p1);

typedef struct tm_bridge tm_bridge;

/* tm_bridge_init: a bridge with its own thread (pinned to cpu, or -1). */
int tm_bridge_init(tm_bridge **out, int cpu, tm_err *err);
void tm_bridge_free(tm_bridge *b);

/* tm_bridge_begin: start a hand-off of positions [p0, p1) of one sequence. */
void tm_bridge_begin(tm_bridge *b, const tm_kv_cache *src, const tm_kv_seq *ss, tm_kv_cache *dst,
                     tm_kv_seq *ds, int p0, int p1);
/* tm_bridge_layer_done: layer is complete in the staging cache; queue its copy.
 * Safe to call from the prefill thread (matches engine on_layer). */
void tm_bridge_layer_done(void *bridge, int layer);
/* tm_bridge_finish: wait for all queued copies. Returns the seconds the
 * caller waited (the hand-off time on the critical path). */
double tm_bridge_finish(tm_bridge *b);
/* Seconds the bridge thread spent copying in the last hand-off. */
double tm_bridge_busy_seconds(const tm_bridge *b);

#endif
