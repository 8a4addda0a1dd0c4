"""The CUDA caching allocator's rules and what lives beside it (vramlib.memory.allocator), against the examples
PyTorch's own developers give and the sources' constants."""
from __future__ import annotations

import pytest

import vramlib as vl
from vramlib.core.errors import VramlibError
from vramlib.memory import allocator as A

MiB = 2 ** 20


@pytest.mark.parametrize("sizes,expandable,reserved,allocated", [
    ([16 * MiB] * 8, False, 128 * MiB, 128 * MiB),     # pytorch devlog 2026-06-01: eight 16 MiB segments
    ([16 * MiB] * 8, True, 140 * MiB, 128 * MiB),      # ... and seven 20 MiB pages with expandable segments
    ([4 * MiB] * 6, False, 40 * MiB, 24 * MiB),        # one 20 MiB segment serves five, the fifth takes its rest whole
    ([10 * MiB + 1] * 3, False, 36 * MiB, 3 * (10 * MiB + 512)),   # own 12 MiB segments, split
    ([1000] * 5000, False, 6 * MiB, 5000 * 1024),      # 512-byte rounding, 2 MiB small segments
    ([0, 1, 511, 512, 513], False, 2 * MiB, 512 * 3 + 1024),      # 0 bytes allocate nothing
])
def test_reserved_for_follows_the_allocator(sizes, expandable, reserved, allocated):
    assert A.reserved_for(sizes, expandable) == [reserved, allocated]


def test_a_block_handed_out_whole_counts_as_allocated():
    """A large block whose rest would be 1 MiB or less is not split: memory_allocated counts all of it."""
    got = A.reserved_for([19 * MiB + 512, 20 * MiB], False)
    assert got == [40 * MiB, 40 * MiB]


@pytest.mark.parametrize("model", ["llama-2-7b", "llama-3.1-8b", "qwen2.5-0.5b", "mistral-7b", "gemma-2-9b",
                                   "phi-3-mini", "falcon-7b"])
def test_the_weight_tensors_sum_to_the_weights(model):
    m = vl.get_model(model)
    tensors = A.weight_tensors(m, "bf16")
    assert sum(v for _, v in tensors) == vl.weights_bytes(m, "bf16") and len(dict(tensors)) == len(tensors)
    assert sum(v for _, v in A.weight_tensors(m, "fp32")) == 2 * vl.weights_bytes(m, "bf16")
    assert tensors[0][0] == "embed_tokens" and (tensors[-1][0] == "lm_head") != m.tied_embeddings


def test_workspaces_per_card_class():
    h100 = vl.cuda_overheads("llama-2-7b", "h100-sxm-80gb")
    a100 = vl.cuda_overheads("llama-2-7b", "a100-80gb")
    assert h100["cuBLAS + cuBLASLt workspaces"] == 32 * MiB + MiB          # sm90: :4096:8
    assert a100["cuBLAS + cuBLASLt workspaces"] == 8 * MiB + 128 * 1024 + MiB
    assert "lazy loading" in next(iter(a100)) and any("PR #86509" in n for n in a100.notes)
    assert any("fragmentation" in n and "not modelled" in n for n in a100.notes)


def test_gqa_weights_leave_segments_partly_empty_and_expandable_segments_pack_them():
    """Llama-3.1-8B's k and v projections are 8 MiB: each pair shares a 20 MiB segment and leaves 4 MiB unused,
    layer after layer; expandable segments pack them."""
    plain = vl.cuda_overheads("llama-3.1-8b", "a100-80gb")["unused segment space (weights, workspaces)"]
    packed = vl.cuda_overheads("llama-3.1-8b", "a100-80gb", expandable_segments=True)[
        "unused segment space (weights, workspaces)"]
    assert plain > 32 * 4 * MiB > 20 * MiB > packed


def test_flash_backward_buffers():
    m = vl.get_model("llama-2-7b")
    bd = vl.cuda_overheads(m, "a100-80gb", seq=2048)
    assert bd["FlashAttention-2 backward buffers (one layer)"] == 4 * 2048 * 32 * 128 + 4 * 32 * 2048
    gqa = vl.cuda_overheads("llama-3.1-8b", "a100-80gb", seq=2000)["FlashAttention-2 backward buffers (one layer)"]
    assert gqa == 4 * 2048 * 32 * 128 + 4 * 32 * 2048 + 2 * 2 * 2000 * 32 * 128    # rounded to 128; dk, dv expanded
    assert "FlashAttention-2 backward buffers (one layer)" not in vl.cuda_overheads(m, "a100-80gb", training=False)


@pytest.mark.parametrize("args,kw,field", [
    (("llama-2-7b", "mi300x"), {}, "gpu"), (("qwen3-8b", "a100-80gb"), {}, "model"),
    (("llama-2-7b", "a100-80gb"), {"dtype": "int4"}, "dtype"), (("llama-2-7b", "a100-80gb"), {"training": 1}, "training"),
    (("llama-2-7b", "a100-80gb"), {"seq": 0}, "seq"), (("mixtral-8x7b", "a100-80gb"), {}, "model")])
def test_refusals_are_one_line(args, kw, field):
    with pytest.raises(VramlibError) as e:
        vl.cuda_overheads(*args, **kw)
    assert str(e.value).startswith(field) and "\n" not in str(e.value)
