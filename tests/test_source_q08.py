"""Question 8 (why vLLM reports less usable memory than nvidia-smi): the source's claims, as computed budgets."""
from fractions import Fraction

import pytest

import vramlib as vl
from vramlib import serving as S

GiB = 2**30


def test_default_utilization_is_90_percent_of_cudas_total():
    cap = vl.serving_kv_capacity("llama-3.1-8b", "a100-80gb")                   # the source: "only 90% is usable"
    assert cap.gpu_memory_utilization == 0.9
    assert cap.requested_bytes == int(Fraction(9, 10) * cap.cuda_total_bytes)
    assert cap.cuda_total_bytes < cap.card_bytes                                # ... of CUDA's total, not nvidia-smi's
    assert cap.cuda_total_bytes == vl.get_gpu("a100-80gb").cuda_total_bytes    # the published "total capacity"
    assert 0.25 * GiB < cap.driver_reserved_bytes < GiB                         # what the driver keeps


def test_from_the_90_percent_weights_and_overheads_are_deducted_rest_is_kv_pool():
    cap = vl.serving_kv_capacity("llama-3.1-8b", "a100-80gb")
    rest = (cap.requested_bytes - cap.weights_bytes - cap.activation_peak_bytes - cap.non_torch_bytes
            - cap.cuda_graph_bytes)
    assert abs(cap.available_kv_bytes - rest) <= 1
    assert cap.kv_cache_bytes == cap.num_blocks * cap.block_bytes
    assert cap.kv_tokens == cap.num_blocks * 16 == 445_440
    assert round(vl.gib(cap.available_kv_bytes), 1) == 54.4


def test_context_and_framework_overheads_hundreds_of_mb_to_2gb():
    # "CUDA context, kernels, cuBLAS/cuDNN workspaces: a few hundred MB to 1-2 GB"
    cap = vl.serving_kv_capacity("llama-3.1-8b", "a100-80gb")
    overhead = cap.cuda_context_bytes + cap.non_torch_bytes + cap.cuda_graph_bytes
    assert 0.3e9 < overhead < 2e9


def test_nvidia_smi_shows_allocations_not_virtual_memory():
    # After start-up nvidia-smi shows the process holding the KV pool it pre-allocated: nearly the whole card.
    cap = vl.serving_kv_capacity("llama-3.1-8b", "a100-80gb")
    assert cap.process_bytes > cap.requested_bytes
    assert cap.free_bytes < cap.headroom_bytes < 0.11 * cap.cuda_total_bytes
    assert cap.process_bytes + cap.free_bytes + cap.driver_reserved_bytes == cap.card_bytes


def test_prefill_workspace_is_budgeted_not_preallocated():
    cap = vl.serving_kv_capacity("llama-3.1-8b", "a100-80gb")
    assert cap.breakdown["activations (profiled peak)"] == cap.activation_peak_bytes > 1e9
    more = vl.serving_kv_capacity("llama-3.1-8b", "a100-80gb", max_num_seqs=1024)
    assert more.activation_peak_bytes > 3 * cap.activation_peak_bytes           # the sampler's dummy run


def test_published_logs_reproduced():
    for row in S.published_profile_check():
        assert row["estimated GiB"] == pytest.approx(row["logged activation GiB"], rel=0.07)


def test_24gb_card_cannot_hold_the_default_context():
    cap = vl.serving_kv_capacity("llama-3.1-8b", "rtx-4090")
    assert cap.starts and not cap.fits_max_model_len and cap.kv_tokens == 36_256


def test_multiple_instances_each_take_their_fraction():
    # two instances at 0.45 each: each requests 45% of the card; the second still starts
    a = vl.serving_kv_capacity("qwen2.5-0.5b", "a100-80gb", gpu_memory_utilization=0.45)
    assert a.starts and a.requested_bytes < 0.46 * a.cuda_total_bytes
