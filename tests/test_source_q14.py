"""Question 14 (the bookshelf): the source gives no numbers, so these assert the claims chapter 14 states,
computed through vramlib for its default scenario (Llama-3.1-8B on an RTX 4090)."""
import pytest

import vramlib as vl
from vramlib import bookshelf as bs

M = "llama-3.1-8b"
CAP = vl.get_gpu("rtx-4090").memory_bytes
INF = vl.inference_memory(M, "bf16", "bf16", 4096, 1, "sdpa", prefill_chunk=2048)
TRAIN = vl.training_memory(M, "full", seq=2048, precision="bf16")


def test_the_shelf_is_24_gib():
    assert CAP == 24 * 2**30 - 12 * 2**20            # nvidia-smi: 24,564 MiB
    assert round(vl.gb(CAP), 1) == 25.8


def test_colour_books_and_notes_fit_for_using_the_model():
    assert vl.weights_bytes(M, "bf16") == 2 * vl.get_model(M).n_params == 16_060_522_496
    assert vl.kv_bytes_per_token(M, "bf16") == 2 * 32 * 8 * 128 * 2 == 131_072
    assert INF["kv cache"] == 131_072 * 4096
    assert INF.fits(CAP) and round(vl.gb(INF.total), 1) == 17.3


def test_teaching_overflows_more_than_five_shelves():
    assert not TRAIN.fits(CAP)
    n = vl.get_model(M).n_params
    assert TRAIN["gradients"] == 2 * n and TRAIN["master weights (fp32)"] == 4 * n
    assert TRAIN["optimizer states"] == 8 * n         # Llama has no biases: every tensor takes 8 B of AdamW state
    shelf = bs.shelf_layout(TRAIN, CAP)
    assert 5.5 < shelf.shelves_needed < 5.6
    assert bs.min_shelves(TRAIN, CAP) == 12
    assert 8 < bs.how_many_times(TRAIN.total, INF.total) < 8.5


def test_print_quality_ratios():
    # the source: black-and-white (INT4) takes fewer compartments than full colour (FP32): 8 times
    assert bs.how_many_times(vl.weights_bytes(M, "fp32"), vl.weights_bytes(M, "int4")) == 8.0
    # same volumes, thinner: bf16 -> Q4_K_M about 3.3 times
    assert 3.2 < bs.how_many_times(vl.weights_bytes(M, "bf16"), vl.weights_bytes(M, "q4_k_m")) < 3.3
    # a real 4-bit format keeps the 128K-token embeddings, output layer and norms in 16 bits: 2.1 GB in colour
    norms = vl.get_model(M).param_groups()["norm"]
    assert vl.weights_detail(M, "gptq-4bit-g128")["unquantized tensors"] == 2 * (2 * 128256 * 4096 + norms)


def test_long_conversation_overflows_colour_fits_paperbacks():
    long = 131_072
    assert vl.kv_cache_bytes(M, long, dtype="bf16") == 2**34                   # 17.2 GB of notes
    assert not vl.inference_memory(M, "bf16", "bf16", long, prefill_chunk=2048).fits(CAP)
    assert vl.inference_memory(M, "q4_k_m", "bf16", long, prefill_chunk=2048).fits(CAP)
    assert vl.max_tokens(M, CAP, "bf16", "bf16", attention="sdpa", prefill_chunk=2048) < long
    assert vl.max_tokens(M, CAP, "q4_k_m", "bf16", attention="sdpa", prefill_chunk=2048) > long


def test_several_conversations_multiply_the_notes():
    assert vl.kv_cache_bytes(M, 4096, 8, "bf16") == 8 * vl.kv_cache_bytes(M, 4096, 1, "bf16")
    assert vl.max_batch(M, CAP, 4096, "bf16", "bf16", attention="sdpa") == 9


def test_grouped_query_notes_are_four_times_fewer_than_the_source_shape():
    # 32 query heads sharing 8 KV heads: a quarter of the notes of the source's 7B multi-head shape
    assert vl.kv_bytes_per_token("source-7b", "bf16") == 4 * vl.kv_bytes_per_token(M, "bf16") == 524_288


def test_quantized_books_do_not_rescue_full_training_but_qlora_fits():
    with pytest.raises(vl.InvalidValueError, match="precision"):
        vl.training_memory(M, "full", precision="int4")
    assert vl.training_memory(M, "qlora", seq=2048).fits(CAP)


def test_the_training_picture_of_the_source_leaves_out_ledgers_and_notebooks():
    source_parts = TRAIN["weights"] + TRAIN["gradients"] + TRAIN["optimizer states"]
    missing = TRAIN["master weights (fp32)"] + TRAIN["activations"]
    assert source_parts + missing + TRAIN["reserve (CUDA context, framework)"] == TRAIN.total
    assert vl.gb(missing) > 45
