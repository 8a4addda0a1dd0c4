import pytest
from hypothesis import given, strategies as st

import vramlib as vl
from vramlib.core.errors import VramlibError


@pytest.mark.parametrize("text,expected", [
    ("24GiB", 24 * 2**30), ("80 GB", 80 * 10**9), ("0.5GB", 500_000_000), ("512 MiB", 512 * 2**20),
    ("1TB", 10**12), ("100B", 100), ("0", 0), (" 2 gib ", 2 * 2**30), (12345, 12345),
])
def test_parse_memory(text, expected):
    assert vl.parse_memory(text) == expected


@pytest.mark.parametrize("bad", ["24 GX", "GB", "1e9", "2**30", "__import__('os')", -5, True, None, "24GiB; rm"])
def test_parse_memory_rejects_with_one_line(bad):
    with pytest.raises(VramlibError) as e:
        vl.parse_memory(bad, field="memory")
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith("memory:")


def test_unknown_model_suggests_close_matches():
    with pytest.raises(vl.UnknownNameError) as e:
        vl.get_model("llama-2-13")
    assert "llama-2-13b" in str(e.value) and "\n" not in str(e.value)
    assert str(e.value).startswith("model:")


def test_unknown_precision_and_gpu():
    with pytest.raises(vl.UnknownNameError, match="did you mean 'nf4'"):
        vl.get_precision("nf5")
    with pytest.raises(vl.UnknownNameError, match="gpu"):
        vl.get_gpu("rtx-9090")


def test_kv_heads_must_divide_heads():
    m = vl.get_model("llama-2-13b")
    with pytest.raises(vl.InvalidValueError) as e:
        m.with_(n_kv_heads=3)
    assert str(e.value).startswith("n_kv_heads:") and "must divide n_heads=40" in str(e.value)


@pytest.mark.parametrize("kw", [dict(tokens=0), dict(tokens=-1), dict(batch=0), dict(tokens=1.5), dict(tokens="10")])
def test_non_positive_sizes(kw):
    args = dict(tokens=10, batch=1) | kw
    with pytest.raises(vl.InvalidValueError):
        vl.kv_cache_bytes("llama-2-7b", **args)


def test_no_eval_of_user_text():
    # a string that would do something if evaluated is only ever a parse error
    with pytest.raises(VramlibError):
        vl.max_tokens("llama-2-7b", memory="__import__('os').getcwd()")


@given(st.integers(min_value=0, max_value=10**15))
def test_parse_memory_ints_roundtrip(n):
    assert vl.parse_memory(n) == n
    assert vl.parse_memory(f"{n}B") == n
