#!/usr/bin/python3
"""Write a synthetic BF16 GGUF of the Qwen3-30B-A3B shape (llama.cpp's "qwen3moe"), optionally cut to its
first N layers: the peer's side of `tandem synth --like qwen3-30b-a3b --layers N`.

The peers' make_synth_gguf.py (../shared/peers) writes the dense shapes only; this is its MoE counterpart,
with the same conventions: a dummy SPM vocabulary of the right size (token ids are fed directly), norms 1,
weights from N(0, 0.02) in bf16. To write ~11 GB in seconds, the weights are slices of one pool of random
values (speed does not depend on the values; the router's rows still differ, so routing spreads).

Usage: PYTHONPATH=$PEER/gguf-py python3 tools/make_moe_gguf.py OUT.gguf [LAYERS]
Needs numpy and gguf-py (the llama.cpp source tree's)."""
import sys
import numpy as np
import gguf

V, D, L, H, HK, HD, E, K, FE = 151936, 2048, 48, 32, 4, 128, 128, 8, 768

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


def main():
    path, layers = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else L
    w = gguf.GGUFWriter(path, "qwen3moe")
    w.add_name("synthetic-qwen3-30b-a3b")
    w.add_context_length(40960)
    w.add_embedding_length(D)
    w.add_block_count(layers)
    w.add_feed_forward_length(6144)
    w.add_expert_feed_forward_length(FE)
    w.add_expert_count(E)
    w.add_expert_used_count(K)
    w.add_head_count(H)
    w.add_head_count_kv(HK)
    w.add_key_length(HD)
    w.add_value_length(HD)
    w.add_rope_freq_base(1000000.0)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_vocab_size(V)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_BF16)
    toks = ["<unk>", "<s>", "</s>"] + [f"<t{i}>" for i in range(3, V)]
    ttype = [gguf.TokenType.UNKNOWN, gguf.TokenType.CONTROL, gguf.TokenType.CONTROL] + [gguf.TokenType.NORMAL] * (V - 3)
    w.add_tokenizer_model("llama")
    w.add_token_list(toks)
    w.add_token_scores([0.0] * V)
    w.add_token_types(ttype)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
    w.add_add_bos_token(True)
    BF = gguf.GGMLQuantizationType.BF16

    def T(n, shape):
        w.add_tensor(n, rand(shape), raw_shape=shape, raw_dtype=BF)

    ones = lambda n: np.ones(n, dtype=np.float32)
    T("token_embd.weight", (V, D))
    T("output.weight", (V, D))
    w.add_tensor("output_norm.weight", ones(D))
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
        w.add_tensor(p + "ffn_gate_inp.weight", (rng.standard_normal((E, D), dtype=np.float32) * 0.02).astype(np.float32))
        T(p + "ffn_gate_exps.weight", (E, FE, D))
        T(p + "ffn_up_exps.weight", (E, FE, D))
        T(p + "ffn_down_exps.weight", (E, D, FE))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(path)


if __name__ == "__main__":
    main()
