#!/usr/bin/python3
"""Write a synthetic BF16 GGUF of a mixture-of-experts shape, optionally cut to its first N layers: the peer's
side of `tandem synth --like SHAPE --layers N`. SHAPE: qwen3-30b-a3b (llama.cpp's "qwen3moe", the default) or
deepseek-v2-lite ("deepseek2" with its multi-head latent attention in llama.cpp's MLA form: the one latent kv
head of kv_lora + rope, kv_b split into attn_k_b / attn_v_b; no YaRN, which does not change the speed).

The peers' make_synth_gguf.py (../shared/peers) writes the dense shapes only; this is its MoE counterpart,
with the same conventions: a dummy SPM vocabulary of the right size (token ids are fed directly), norms 1,
weights from N(0, 0.02) in bf16. To write ~11 GB in seconds, the weights are slices of one pool of random
values (speed does not depend on the values; the router's rows still differ, so routing spreads).

Usage: PYTHONPATH=$PEER/gguf-py python3 tools/make_moe_gguf.py OUT.gguf [LAYERS [SHAPE]]
Needs numpy and gguf-py (the llama.cpp source tree's)."""
import sys
import numpy as np
import gguf

V, D, L, H, HK, HD, E, K, FE = 151936, 2048, 48, 32, 4, 128, 128, 8, 768
# DeepSeek-V2-Lite (hf/synth.c's preset deepseek-v2-lite)
DS = dict(V=102400, D=2048, L=27, H=16, F=10944, FE=1408, E=64, K=6, S=2, KVL=512, NOPE=128, ROPE=64, VD=128)

rng = np.random.default_rng(1234)
POOL = 1 << 26


def bf16(a):
    u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)
    u = (u + (np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1)))) >> np.uint32(16)
    return u.astype(np.uint16)


pool = bf16(rng.standard_normal(POOL, dtype=np.float32) * np.float32(0.02))
at = 0


def rand(shape):
    """bf16 values of the given shape, a slice of the pool from a moving offset"""
    global at
    n = int(np.prod(shape))
    out = np.empty(n, dtype=np.uint16)
    done = 0
    while done < n:
        k = min(n - done, POOL - at)
        out[done:done + k] = pool[at:at + k]
        done += k
        at = (at + k + 7919) % POOL
    return out.reshape(shape)


def vocab(w, n):
    toks = ["<unk>", "<s>", "</s>"] + [f"<t{i}>" for i in range(3, n)]
    ttype = [gguf.TokenType.UNKNOWN, gguf.TokenType.CONTROL, gguf.TokenType.CONTROL] + [gguf.TokenType.NORMAL] * (n - 3)
    w.add_tokenizer_model("llama")
    w.add_token_list(toks)
    w.add_token_scores([0.0] * n)
    w.add_token_types(ttype)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
    w.add_add_bos_token(True)


BF = gguf.GGMLQuantizationType.BF16
ones = lambda n: np.ones(n, dtype=np.float32)


def router(n, d):
    return (rng.standard_normal((n, d), dtype=np.float32) * 0.02).astype(np.float32)


def start(arch, name, layers, ctx, d, v, ff, fe, e, k, h, hk, kl, vl, theta):
    """a writer with the hyperparameters both shapes have, the vocabulary, the embedding, the head and its norm;
    returns it and T(name, shape), which adds a bf16 tensor of random values"""
    w = gguf.GGUFWriter(path_out, arch)
    w.add_name(name)
    w.add_context_length(ctx)
    w.add_embedding_length(d)
    w.add_block_count(layers)
    w.add_feed_forward_length(ff)
    w.add_expert_feed_forward_length(fe)
    w.add_expert_count(e)
    w.add_expert_used_count(k)
    w.add_head_count(h)
    w.add_head_count_kv(hk)
    w.add_key_length(kl)
    w.add_value_length(vl)
    w.add_rope_freq_base(theta)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_vocab_size(v)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_BF16)
    vocab(w, v)

    def T(n, shape):
        w.add_tensor(n, rand(shape), raw_shape=shape, raw_dtype=BF)

    T("token_embd.weight", (v, d))
    T("output.weight", (v, d))
    w.add_tensor("output_norm.weight", ones(d))
    return w, T


def qwen3moe(layers):
    w, T = start("qwen3moe", "synthetic-qwen3-30b-a3b", layers, 40960, D, V, 6144, FE, E, K, H, HK, HD, HD, 1000000.0)
    for i in range(layers):
        p = f"blk.{i}."
        w.add_tensor(p + "attn_norm.weight", ones(D))
        T(p + "attn_q.weight", (H * HD, D))
        T(p + "attn_k.weight", (HK * HD, D))
        T(p + "attn_v.weight", (HK * HD, D))
        T(p + "attn_output.weight", (D, H * HD))
        w.add_tensor(p + "attn_q_norm.weight", ones(HD))
        w.add_tensor(p + "attn_k_norm.weight", ones(HD))
        w.add_tensor(p + "ffn_norm.weight", ones(D))
        w.add_tensor(p + "ffn_gate_inp.weight", router(E, D))
        T(p + "ffn_gate_exps.weight", (E, FE, D))
        T(p + "ffn_up_exps.weight", (E, FE, D))
        T(p + "ffn_down_exps.weight", (E, D, FE))
    return w


def deepseek2(layers):
    c = DS
    v, d, h, kvl, nope, rope, vd, e, fe = c["V"], c["D"], c["H"], c["KVL"], c["NOPE"], c["ROPE"], c["VD"], c["E"], c["FE"]
    a = "deepseek2"
    # the MLA form: one latent kv head of kv_lora + rope (keys) and kv_lora (values)
    w, T = start(a, "synthetic-deepseek-v2-lite", layers, 163840, d, v, c["F"], fe, e, c["K"], h, 1, kvl + rope, kvl,
                 10000.0)
    w.add_expert_shared_count(c["S"])
    w.add_expert_weights_scale(1.0)
    w.add_uint32(f"{a}.leading_dense_block_count", 1)
    w.add_uint32(f"{a}.attention.key_length_mla", nope + rope)
    w.add_uint32(f"{a}.attention.value_length_mla", vd)
    w.add_uint32(f"{a}.attention.q_lora_rank", 0)
    w.add_uint32(f"{a}.attention.kv_lora_rank", kvl)
    w.add_rope_dimension_count(rope)
    for i in range(layers):
        p = f"blk.{i}."
        w.add_tensor(p + "attn_norm.weight", ones(d))
        T(p + "attn_q.weight", (h * (nope + rope), d))
        T(p + "attn_kv_a_mqa.weight", (kvl + rope, d))
        w.add_tensor(p + "attn_kv_a_norm.weight", ones(kvl))
        T(p + "attn_k_b.weight", (h, kvl, nope))
        T(p + "attn_v_b.weight", (h, vd, kvl))
        T(p + "attn_output.weight", (d, h * vd))
        w.add_tensor(p + "ffn_norm.weight", ones(d))
        if i < 1:
            T(p + "ffn_gate.weight", (c["F"], d))
            T(p + "ffn_up.weight", (c["F"], d))
            T(p + "ffn_down.weight", (d, c["F"]))
            continue
        w.add_tensor(p + "ffn_gate_inp.weight", router(e, d))
        T(p + "ffn_gate_exps.weight", (e, fe, d))
        T(p + "ffn_up_exps.weight", (e, fe, d))
        T(p + "ffn_down_exps.weight", (e, d, fe))
        T(p + "ffn_gate_shexp.weight", (fe * c["S"], d))
        T(p + "ffn_up_shexp.weight", (fe * c["S"], d))
        T(p + "ffn_down_shexp.weight", (d, fe * c["S"]))
    return w


path_out = None


def main():
    global path_out
    path = path_out = sys.argv[1]
    shape = sys.argv[3] if len(sys.argv) > 3 else "qwen3-30b-a3b"
    if shape not in ("qwen3-30b-a3b", "deepseek-v2-lite"):
        sys.exit(f"make_moe_gguf.py: unknown shape {shape} (qwen3-30b-a3b, deepseek-v2-lite)")
    full = L if shape == "qwen3-30b-a3b" else DS["L"]
    layers = int(sys.argv[2]) if len(sys.argv) > 2 else full
    w = (qwen3moe if shape == "qwen3-30b-a3b" else deepseek2)(layers)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(path)


if __name__ == "__main__":
    main()
