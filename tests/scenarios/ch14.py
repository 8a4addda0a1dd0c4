"""Chapter 14 alternate scenario: Mistral-7B on an L4, FP16 colour books, INT8 and NF4 editions, 64K tokens."""
from __future__ import annotations

import vramlib as vl
from vramlib import bookshelf as bs

STEM = "ch14-bookshelf"
PARAMS = dict(model="mistral-7b", gpu="l4", precision="fp16", compact_8bit="int8", compact_4bit="nf4",
              real_4bit="awq-4bit-g128", context=8192, long_context=65536, conversations=4, train_seq=1024,
              volumes=10)


def expected(p: dict) -> dict:
    m = vl.get_model(p["model"])
    cap = vl.get_gpu(p["gpu"]).memory_bytes
    prec, kv = p["precision"], p["precision"]

    def using(weights, tokens, batch=1):
        return vl.inference_memory(m, weights, kv, tokens, batch, "sdpa", prefill_chunk=p["prefill_chunk"])

    inf = using(prec, p["context"])
    train = vl.training_memory(m, "full", seq=p["train_seq"], precision=prec)
    shelf_inf, shelf_train = bs.shelf_layout(inf, cap, prec), bs.shelf_layout(train, cap, prec)
    q4 = bs.shelf_layout(using(p["compact_4bit"], p["context"]), cap, p["compact_4bit"])
    long_bf = bs.shelf_layout(using(prec, p["long_context"]), cap, prec)
    long_q4 = bs.shelf_layout(using(p["compact_4bit"], p["long_context"]), cap, p["compact_4bit"])
    qlora = vl.training_memory(m, "qlora", seq=p["train_seq"], precision=prec)
    return {
        "q14_cap_gb": vl.gb(cap),
        "q14_books_gb": vl.gb(vl.weights_bytes(m, prec)),
        "q14_notes_gb": vl.gb(vl.kv_cache_bytes(m, p["context"], dtype=kv)),
        "q14_inf_gb": vl.gb(inf.total),
        "q14_free_gb": vl.gb(cap - inf.total) if shelf_inf.fits else 0.0,
        "q14_train_gb": vl.gb(train.total),
        "q14_train_x": train.total / cap,
        "q14_overflow_gb": vl.gb(shelf_train.overflow_bytes),
        "q14_params": m.n_params,
        "q14_master_gb": vl.gb(train["master weights (fp32)"]),
        "q14_min_shelves": bs.min_shelves(train, cap),
        "q14_kv_tok": vl.kv_bytes_per_token(m, kv),
        "q14_books_q8_gb": vl.gb(vl.weights_bytes(m, p["compact_8bit"])),
        "q14_books_q4_gb": vl.gb(vl.weights_bytes(m, p["compact_4bit"])),
        "q14_q4_x": vl.weights_bytes(m, prec) / vl.weights_bytes(m, p["compact_4bit"]),
        "q14_free_q4_gb": vl.gb(q4.free_bytes),
        "q14_notes_long_gb": vl.gb(vl.kv_cache_bytes(m, p["long_context"], dtype=kv)),
        "q14_long_total_gb": vl.gb(long_bf.total_bytes),
        "q14_long_over_gb": vl.gb(long_bf.overflow_bytes),
        "q14_long_q4_free_gb": vl.gb(long_q4.free_bytes),
        "q14_max_ctx": vl.max_tokens(m, cap, prec, kv, attention="sdpa", prefill_chunk=p["prefill_chunk"]),
        "q14_max_ctx_q4": vl.max_tokens(m, cap, p["compact_4bit"], kv, attention="sdpa",
                                        prefill_chunk=p["prefill_chunk"]),
        "q14_notes_conv_gb": vl.gb(vl.kv_cache_bytes(m, p["context"], p["conversations"], kv)),
        "q14_max_conv": vl.max_batch(m, cap, p["context"], prec, kv, attention="sdpa"),
        "q14_src_kv_x": vl.kv_bytes_per_token(p["source_model"], kv) / vl.kv_bytes_per_token(m, kv),
        "q14_books_fp32_gb": vl.gb(vl.weights_bytes(m, "fp32")),
        "q14_train_vs_inf_x": train.total / inf.total,
        "q14_qlora_gb": vl.gb(qlora.total),
        "q14_real4_colour_gb": vl.gb(vl.weights_detail(m, p["real_4bit"])["unquantized tensors"]),
    }
